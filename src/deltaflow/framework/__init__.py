"""deltaflow framework: the model, in pure Python (no trio, no operators).

* :mod:`.lattice` - timestamps (``int`` and :class:`~.lattice.Product`) and their lattice;
* :mod:`.antichain` - antichains and frontiers, counted and changing;
* :mod:`.summary` - path summaries: how a time changes along a path of the graph;
* :mod:`.time_domain` - the shape of a scope's times, chosen once before anything runs;
* :mod:`.progress` - progress tracking: which times can still reach each operator input;
* :mod:`.trace` - arrangement storage: batches, merges, spines, cursors;
* :mod:`.durable` - what a checkpoint stores (Arrow columns and tables) and where;
* :mod:`.kernels` - whether bulk work on ints takes the numpy kernels or the general path;
* :mod:`.tuning` - every performance constant, what it trades and what set it;
* :mod:`.hashing` - a hash equal in every process, for routing updates to workers;
* :mod:`.schema` - declared input columns (Spark DDL) and reading values by their type.
"""
