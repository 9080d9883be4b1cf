"""deltaflow operators: what each operator computes, and the API that builds a dataflow of them.

Every operator sees the runtime only through :class:`~.base.OperatorContext`, so each can be
tested without trio. Each module (or package) below imports only those listed before it
(``tests/test_import_cycles.py`` checks it): the builders of ``reduce/``, ``windows/`` and
``delta/`` know ``Collection`` only as a type, and add nodes through the builder every
collection carries (``collection.builder.add(...)``, see :mod:`.builder`).

The operators and what they share:

* :mod:`.base` - :class:`~.base.Operator`, the context an operator runs in, update batches;
* :mod:`.values` - checks on the values reductions order, add up or count;
* :mod:`.durable` - what an operator with state saves at a checkpoint and loads on resuming;
* :mod:`.dataflow` - the graph under construction: nodes, edges, pacts (routing), traits;
* :mod:`.linear` - ``map``, ``filter``, ``flat_map``, ``explode``, ``negate``, ``concat``,
  ``consolidate``, ``exchange``: no state;
* :mod:`.arrange` - arrangements: a collection indexed by key into a shared trace;
* :mod:`.inlet` - an arrangement without a trace run by the port of its only reader;
* :mod:`.io` - inputs, outputs and probes;
* :mod:`.scope` - :class:`~.scope.Scope` (how times nest) and the operators crossing scopes;
* :mod:`.join` - joins of two arrangements, and per-key join histories;
* :mod:`.reduce` - ``reduce`` and the reductions built on it, by interesting times;
* :mod:`.aggregate` - ``sum`` and ``mean`` as ``reduce`` logics;
* :mod:`.windows` - event-time windows (tumbling, sliding, session), retention, watermarks;
* :mod:`.delta` - delta queries: indexes, lookups as of a time, prefix extenders.

The build API, bottom to top:

* :mod:`.collection` - :class:`~.collection.Collection`, the user's handle, and
  :class:`~.collection.Arranged`;
* :mod:`.iterate` - loop scopes, :class:`~.iterate.Variable` (a ``Collection``), ``iterate``;
* :mod:`.delta.query` - ``multiway_join``, whose atoms are collections;
* :mod:`.builder` - :class:`~.builder.DataflowBuilder`: what ``build()`` records, and the
  maker of every handle and node;
* :mod:`.pipeline` - :class:`~.pipeline.Pipeline`, the base class of a computation.
"""
