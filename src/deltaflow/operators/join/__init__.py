"""Joins: ``join``, ``join_map``, ``semijoin``, ``antijoin`` of two arrangements of one key,
and the per-key histories the operators that are an arrangement's only reader keep.

One module per concept:

* :mod:`.operator` - :class:`~.operator.JoinOperator`: each batch arriving on one side joined
  with what the operator has acknowledged of the other, each pair made exactly once; a side
  it alone reads kept in memory, as a history or as int columns;
* :mod:`.kernel` - the join of a batch with a side of int data as a numpy kernel, and that
  side as key-sorted int64 runs (:class:`~.kernel.SortedRuns`);
* :mod:`.lookup` - looking keys up in those runs, a few by binary search, many at once;
* :mod:`.history` - :class:`~.history.KeyedHistory`, ``{key: [(val, time, diff)]}`` with its
  compaction, kept by joins and reductions alike.

The thresholds choosing between the paths are in :mod:`deltaflow.framework.tuning`.
"""
