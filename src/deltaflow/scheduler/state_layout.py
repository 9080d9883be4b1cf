"""Naming a job's state independently of its layout: a :class:`StateLayout` does not depend
on the number of workers or processes (nodes a layout adds are left out, a delta rule's
operators count as one), so any layout resumes any checkpoint (:mod:`.checkpoint`).

Its fingerprint (operators, wiring, inputs, outputs) tells a checkpoint of another pipeline
apart (:func:`check_pipeline`), and its per-operator digests of the code they run
(:mod:`deltaflow.framework.durable.code`) a checkpoint made by other code (:func:`check_code`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import CheckpointError
from ..framework.durable import code as code_digest

if TYPE_CHECKING:
    from ..operators.builder import DataflowBuilder
    from .local.plan import Plan

__all__ = ["StateLayout", "check_code", "check_pipeline", "state_layout"]

_log = logging.getLogger("deltaflow")

_LINE = re.compile(r":\d+")
_PHASE = re.compile(r"\[\d+\]$")


@attrs.frozen
class StateLayout:
    """A job's operators named independently of its workers and processes.

    Attributes:
        fingerprint: a digest of the pipeline's operators (names without source lines),
            their depth and wiring, its inputs and its outputs.
        nodes: each actor (physical node) by its stable name.
        inputs: each input's actor.
        code: per stable name of an operator: its ``name`` (as errors show it) and the
            ``digest`` of the code it runs (:func:`deltaflow.framework.durable.code.digest`).
        outputs: the outputs' names.
    """

    fingerprint: str
    nodes: dict[int, str]
    inputs: dict[str, int]
    code: dict[str, dict[str, str]] = attrs.field(factory=dict)
    outputs: tuple[str, ...] = ()

    def code_entry(self) -> dict[str, Any]:
        """What a manifest says of the code (its ``"code"`` field)."""
        return {
            "python": code_digest.python_version(),
            "encoding": code_digest.ENCODING,
            "operators": self.code,
        }


def state_layout(builder: DataflowBuilder, plan: Plan) -> StateLayout:
    """The :class:`StateLayout` of a job built as ``builder`` and planned as ``plan``.

    Nodes added for a layout (``builder.layout_nodes``) are skipped (an edge from one is
    followed to its own input); the operators of one delta rule (one with one worker, one per
    phase with several) are one node, their phases ``.0``, ``.1``...
    """
    spec = builder.spec.nodes
    number: dict[int, int] = {}  # logical node -> its number among the nodes that count
    phase: dict[int, int] = {}
    rules: dict[int, int] = {}  # id of a rule's tally -> its number
    count = 0
    for i, node in enumerate(spec):
        if i in builder.layout_nodes:
            continue
        tally = node.traits.tally
        if tally is not None and id(tally) in rules:
            number[i] = rules[id(tally)]
            phase[i] = sum(1 for j in phase if number[j] == number[i])
            continue
        number[i] = count
        if tally is not None:
            rules[id(tally)] = count
            phase[i] = 0
        count += 1

    def source(i: int) -> int:
        while i in builder.layout_nodes:
            i = spec[i].inputs[0].node
        return i

    described: dict[int, dict[str, Any]] = {}
    for i, node in enumerate(spec):
        k = number.get(i)
        if k is None:
            continue
        entry = described.setdefault(
            k, {"name": _PHASE.sub("", _LINE.sub("", node.name)), "depth": node.depth, "in": []}
        )
        for edge in node.inputs:
            src = number[source(edge.node)]
            if src != k:
                entry["in"].append([src, edge.port])
    for entry in described.values():
        entry["in"] = sorted({tuple(e) for e in entry["in"]})
    inputs = sorted(n.name for n in spec if n.name.startswith("input:"))
    outputs = sorted(builder.stores)
    text = json.dumps(
        {"inputs": inputs, "outputs": outputs, "nodes": [described[k] for k in range(count)]},
        sort_keys=True,
    )
    members: dict[int, list[int]] = {}
    for i, k in number.items():
        members.setdefault(k, []).append(i)
    code = {}
    for k in range(count):
        parts = [spec[i] for i in members[k]]
        if parts[0].name.startswith("input:"):
            digest = ""  # (it runs no user code; its factory holds one feed per worker)
        elif parts[0].traits.tally is not None:
            # A delta rule: one node, or one per phase, by the layout: the same functions.
            digest = code_digest.functions_digest([(p.factory, p.inputs) for p in parts])
        else:
            (part,) = parts
            digest = code_digest.digest(part.factory, [edge.pact for edge in part.inputs])
        code[str(k)] = {"name": _PHASE.sub("", parts[0].name), "digest": digest}
    logical_of = {phys: i for i, phys in plan.physical_of.items()}
    nodes = {}
    for phys, i in logical_of.items():
        if i in number:
            nodes[phys] = f"{number[i]}" if i not in phase else f"{number[i]}.{phase[i]}"
    input_actors = {
        spec[i].name.removeprefix("input:"): phys
        for i, phys in plan.physical_of.items()
        if spec[i].name.startswith("input:")
    }
    fingerprint = hashlib.sha256(text.encode()).hexdigest()
    return StateLayout(fingerprint, nodes, input_actors, code, tuple(outputs))


def check_pipeline(manifest: Mapping[str, Any], layout: StateLayout, where: str, name: str) -> None:
    """Refuse a checkpoint (``manifest``, read from ``where``) of another pipeline than
    ``name``, whose state is named by ``layout``.

    Raises:
        ValueError: its operators, inputs or outputs differ (naming ``where``).
        CheckpointError: its manifest lacks the entry of an input or output.
    """
    if manifest.get("fingerprint") != layout.fingerprint:
        msg = (
            f"{where} holds a checkpoint of another pipeline "
            f"({manifest.get('pipeline')!r}: other inputs, outputs or operators than "
            f"{name}'s); resume it with that pipeline, or give this one another location"
        )
        raise ValueError(msg)
    for what, names in (("inputs", layout.inputs), ("outputs", layout.outputs)):
        missing = sorted(set(names) - set(manifest[what]))
        if missing:
            msg = f"{where} is damaged: its manifest lists no {what} {missing}"
            raise CheckpointError(msg)


def check_code(
    manifest: Mapping[str, Any], layout: StateLayout, where: str, *, allow: bool = False
) -> None:
    """Refuse a checkpoint (``manifest``, of this pipeline: :func:`check_pipeline`, read from
    ``where``) made by other code than the operators' now, naming the operators whose code
    changed; with ``allow``, log a WARNING on the ``deltaflow`` logger instead. A manifest
    of a version that kept no digests is taken as it is; one whose digests were made by
    another encoding (another deltaflow) too, with a WARNING.

    Raises:
        ValueError: an operator's code changed (and not ``allow``).
    """
    saved = manifest.get("code")
    if saved is None:
        return
    if saved.get("encoding") != code_digest.ENCODING:
        _log.warning(
            "%s: its digests of the operators' code were made by another deltaflow "
            "(encoding %r, this one makes %r) and cannot be compared: resuming without "
            "checking the code",
            where,
            saved.get("encoding"),
            code_digest.ENCODING,
        )
        return
    operators = saved["operators"]
    changed = [
        entry["name"]
        for node, entry in layout.code.items()
        if operators.get(node, {}).get("digest") != entry["digest"]
    ]
    if not changed:
        return
    python = code_digest.python_version()
    why = (
        f" (the checkpoint was written under Python {saved['python']}, this is {python}: "
        "bytecode differs between versions)"
        if saved["python"] != python
        else ""
    )
    shown = ", ".join(repr(n) for n in changed[:5]) + (" ..." if len(changed) > 5 else "")
    msg = (
        f"{where} was made by other code: the code of {len(changed)} operator(s) changed "
        f"since ({shown}){why}"
    )
    if allow:
        _log.warning("%s; resuming anyway (allow_code_change=True)", msg)
        return
    msg += (
        "; its state may not be what this code would have made. Resume with "
        "allow_code_change=True if the change keeps the state valid, or start over with "
        "fresh=True"
    )
    raise ValueError(msg)
