"""``Pipeline``: the base class of a deltaflow computation, and :func:`optional` inputs.

A pipeline's :meth:`Pipeline.build` describes the computation on one
:class:`~deltaflow.operators.collection.Collection` per input; :meth:`Pipeline.instantiate`
runs it into a :class:`~deltaflow.operators.builder.DataflowBuilder` that the scheduler turns
into running actors. Nothing runs while a pipeline is built.

    >>> import deltaflow as df
    >>> class Evens(df.Pipeline):
    ...     def build(self, numbers):
    ...         return numbers.filter(lambda n: n % 2 == 0).map(lambda n: n * 10)
    >>> df.run(Evens(), numbers=[(1, 0, 1), (2, 0, 1), (4, 1, 1), (2, 2, -1)])
    [(20, 0, 1), (40, 1, 1), (20, 2, -1)]
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from ..framework.schema import Schema
from .builder import DataflowBuilder
from .collection import Collection
from .iterate import check_variables_set

__all__ = ["OptionalInput", "Pipeline", "optional"]


@attrs.frozen
class OptionalInput:
    """The default of a ``build()`` parameter that names an optional input (made by
    :func:`optional`): never passed to ``build``, which always receives a collection."""


def optional() -> Any:
    """Declare an input optional, as the default of its ``build()`` parameter::

        def build(self, clicks: df.Collection, bots: df.Collection = df.optional()): ...

    ``df.run``, the command line and ``dfspark.run`` / ``dfspark.stream`` then read an
    omitted ``bots`` as empty; leaving out any other input is an error naming it.
    """
    return OptionalInput()


class Pipeline:
    """Base class of a deltaflow computation: subclass it and write :meth:`build`.

    ``build``'s parameter names are the pipeline's input names; it receives one
    :class:`Collection` per input and returns the output collection, or a ``dict`` of named
    outputs.

    ``schemas`` declares inputs' columns and types as Spark DDL strings, by input name
    (``{"clicks": "user string, page string, ts long"}``): tables fed to those inputs (files
    on the command line, pandas and Spark DataFrames) are read by them, each datum the
    declared columns in order, each value parsed or checked by its type
    (:mod:`deltaflow.framework.schema`).
    """

    schemas: ClassVar[Mapping[str, str]] = {}

    def input_schema(self, name: str) -> Schema | None:
        """Input ``name``'s declared :class:`~deltaflow.framework.schema.Schema`, if any.

        Raises:
            ValueError: ``schemas`` names an input ``build`` does not take, or a DDL string
                does not parse.
        """
        declared = self.schemas
        if not declared:
            return None
        names = self.input_names()
        unknown = sorted(set(declared) - set(names))
        if unknown:
            msg = f"{type(self).__name__}.schemas declares {unknown}, but the inputs are {names}"
            raise ValueError(msg)
        ddl = declared.get(name)
        if ddl is None:
            return None
        try:
            return Schema.parse(ddl)
        except (TypeError, ValueError) as exc:
            msg = f"{type(self).__name__}.schemas[{name!r}]: {exc}"
            raise type(exc)(msg) from None

    def build(self, *args: Any, **kwargs: Any) -> Collection | dict[str, Collection]:
        """Describe the computation. Override this."""
        raise NotImplementedError

    def optional_inputs(self) -> list[str]:
        """The inputs ``build`` declares optional (a parameter defaulting to
        :func:`deltaflow.optional`): ``df.run``, the command line and the Spark adapter treat
        them as empty when left out, and refuse any other input left out.

        >>> import deltaflow as df
        >>> class Clicks(df.Pipeline):
        ...     def build(self, clicks, bots: df.Collection = df.optional()):
        ...         return clicks.concat(bots.negate())
        >>> Clicks().optional_inputs()
        ['bots']
        """
        params = inspect.signature(self.build).parameters.values()
        return [p.name for p in params if isinstance(p.default, OptionalInput)]

    def input_names(self) -> list[str]:
        """The names of ``build``'s parameters, in order."""
        params = inspect.signature(self.build).parameters.values()
        names = []
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                msg = f"{type(self).__name__}.build() must name its inputs; *args/**kwargs found"
                raise TypeError(msg)
            names.append(p.name)
        return names

    def instantiate(self, workers: int = 1, *, exchange_outputs: bool = False) -> DataflowBuilder:
        """Run ``build`` and return what it recorded (inputs, outputs, graph).

        ``exchange_outputs`` routes every output by its data before the sink, so that equal
        data meet on one worker: each worker's share of an output is then consolidated
        across all workers (what a peer of a mesh returns on its own needs).
        """
        if type(self).build is Pipeline.build:
            msg = f"{type(self).__name__} must override build()"
            raise TypeError(msg)
        builder = DataflowBuilder(workers=workers)
        names = self.input_names()
        inputs = {name: builder.new_input(name) for name in names}
        result: object = self.build(**inputs)
        if isinstance(result, Collection):
            outputs = {"output": result}
        elif isinstance(result, dict) and all(isinstance(v, Collection) for v in result.values()):
            outputs = dict(result)
            builder.single_output = False
            keys: list[object] = list(result)
            if not keys or not all(isinstance(k, str) and k for k in keys):
                msg = (
                    f"{type(self).__name__}.build() must return at least one output, named by "
                    f"non-empty strings; its dict has the names {keys!r}"
                )
                raise TypeError(msg)
        else:
            msg = (
                f"{type(self).__name__}.build() must return a Collection or a dict of "
                f"Collections, not {result!r}"
            )
            raise TypeError(msg)
        for name, coll in outputs.items():
            if coll.builder is not builder:
                msg = f"output {name!r} was built by another pipeline"
                raise ValueError(msg)
            if exchange_outputs:
                coll = coll.exchange()
                builder.layout_nodes.add(coll.node)
            builder.new_output(name, coll)
        check_variables_set(builder)
        return builder
