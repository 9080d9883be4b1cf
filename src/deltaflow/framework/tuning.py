"""Every performance constant of deltaflow in one place: thresholds, batch sizes, slices and
cache bounds, each with its value, what it trades, and the benchmark that set it.

None of these changes what a job computes, only how: each picks between two paths that give
the same collections (a numpy kernel or a per-update loop, a list batch or a columnar one),
or bounds how much work or memory one step may take. The modules that use a constant import
it from here under the name they always used (so a test may still patch
``module.NAME``); a class attribute that a subclass may override (as tests do, to force a
path) takes its default from here, and so does a time domain's threshold for a kernel over
its time columns (``count_kernel_min``, ``join_kernel_min``: the domain of a scope chooses the
kernel, :mod:`deltaflow.framework.time_domain`). Figures named below are in
``benchmarks/RESULTS.md``; the decisions and their before/after measures in
``benchmarks/DECISIONS.md``.

Timeouts, protocol bounds and security limits (frame sizes, handshake and lease timings)
are not tunables and stay with their protocols.

>>> KERNEL_MIN <= JOIN_KERNEL_MIN <= FORWARD_AS_BATCH
True
"""

from __future__ import annotations

# -- columnar kernels: where numpy's fixed cost per call starts to pay -------------------------

KERNEL_MIN = 256
"""``IntDomain.count_kernel_min``: an activation of a counting reduction (``count``,
``distinct``, ``threshold``) at int times with at least this many new updates takes the numpy
kernel (``reduce/columnar.py``) under
``DELTAFLOW_KERNELS=auto``; fewer take the per-key sweep, dearer per update but with no fixed
cost per numpy call. Set by the counting kernel's crossover (RESULTS, "Columnar kernels":
kernel / sweep 0.68 for ``count`` and 0.96 for ``distinct`` at 256 updates)."""

PAIR_KERNEL_MIN = KERNEL_MIN
"""``PairDomain.count_kernel_min``: a counting reduction at ``Product(int, int)`` times moves
its histories into columns (``reduce/pair_counts.py``) for an activation of at least this many
new updates on one passed row (once there, they stay while activations keep that shape).
Taken equal to :data:`KERNEL_MIN` (DECISIONS 11-28: W2 static
0.545x the CPU; single-update rounds keep the per-key path, +0.42%)."""

ROW_BATCH_MIN = 32
"""``ReduceOperator.ROW_BATCH_MIN``: an activation with new times for at least this many
counting keys corrects those on rows together in columns (``RowCounts``); for fewer, numpy's
cost per call outweighs the per-key work it saves (DECISIONS 11-24, W2 static)."""

JOIN_KERNEL_MIN = 1024
"""``IntDomain.join_kernel_min`` and ``PairDomain.join_kernel_min``: updates an arriving batch
must hold for its join to take the numpy kernel under ``auto``; below it the kernel's fixed
cost exceeds the per-update loop's.
Set by ``bench_kernels.py --only sizes`` (RESULTS: 1.28-1.71x slower at 16 updates, 0.95-1.09x
at 1,024)."""

PAIRS_PER_ROW = 8
"""A batch making more than this many pairs per arriving update keeps the join's row path
under ``auto``: the kernel saves the per-key lookup, while each pair still costs a call of the
user's logic. Set by W3's ``join_map`` (9 pairs per update: the kernel 1.07-1.13x slower;
DECISIONS 11-28)."""

COLUMNS_FROM = 32
"""``hashing.COLUMNS_FROM``: fewer keys than this are routed to workers one by one; numpy's
cost per call would outweigh it. Not separately measured: the same crossover as
:data:`ROW_BATCH_MIN`."""

VECTOR_MIN = 64
"""``durable/columns.py``: a checkpoint column of at least this many values takes the
vectorised encoding (strings joined, tuples sliced); a shorter one goes value by value, whose
fixed cost is lower. Set with the clickstream checkpoint (DECISIONS 11-29: 664.8M -> 473.7M
instructions a checkpoint)."""

# -- arrangements, histories, compaction -------------------------------------------------------

FORWARD_AS_BATCH = 32_768
"""``arrange.FORWARD_AS_BATCH``: an arrangement that keeps no trace forwards an activation of
more updates than this (with plain int keys) as a sorted columnar ``Batch``; up to it, as
dict-consolidated raw batches. W2 static's activations (<= 13,500 updates) are 1.04x faster
raw; W4's static load (>= 100,000) 1.2-1.5x slower without the sort (DECISIONS 11-25)."""

ARRANGE_IDLE_FUEL = 10_000
"""``ArrangeOperator.IDLE_FUEL``: merge work an arrangement does per activation while its
spine has merges in progress. Fuelling only merges in progress took ``join_rounds`` from 72
to 1,109 rounds/s (DECISIONS 11-22); the amount itself bounds one activation's latency."""

COMPACT_WRITTEN = 8
"""``join/history.COMPACT_WRITTEN``: a key's in-memory history (a reduction's input or
output) is compacted once it holds more than this many updates; a compaction that freed
nothing waits for as many more. 4-24 tried against 8: none better in both modes (DECISIONS
11-24); the wait took DD's SCC changes -18% (DECISIONS 11-28)."""

COMPACT_ALL_WRITTEN = 4096
"""``KeyedHistory.COMPACT_ALL_WRITTEN``: the whole history is compacted once it holds more than
this many updates and twice as many as after the last such pass (``w2.long`` stays flat)."""

TIDY_SLICE = 2048
"""``KeyedHistory.TIDY_SLICE``: updates a full compaction pass goes through per ``tidy`` call
at least, so that a pass is spread over activations. Longest ``tidy`` 41-50 -> 8-10 ms, W2 p99
34 -> 28 ms, for 0.9% more instructions (DECISIONS 11-24)."""

JOIN_COMPACT_ABOVE = 4
"""``join/operator.JOIN_COMPACT_ABOVE``: a join compacts a key's list in its own history of
a side once it holds more than this many updates (every update there is joined with each
arriving match). W2 long-vs-fresh 1.25 -> 1.09-1.16; 3 and 6 measured +1.2% and +0.7% (DECISIONS
11-24)."""

PAIR_COMPACT_MIN = 4096
"""``pair_counts.COMPACT_MIN``: the pair kernel's columns are compacted once they hold more
than this many updates and twice as many as the previous compaction left (amortised: a
vectorised ``advance_by`` and consolidation per doubling)."""

SMALL_ACCUMULATE = 24
"""``reduce/accumulation.py``: ``accumulate`` compares every update with every time when there
are at most this many pairs of them (the sorted sweep's set-up costs more below)."""

# -- joins -------------------------------------------------------------------------------------

LOOKUP_CHUNK = 1024
"""``join/operator.LOOKUP_CHUNK``: keys of an arriving batch looked up in the other side
together; bounds what one look-up holds, no throughput effect measured."""

ROW_READ_COST = 8
"""``join/operator.ROW_READ_COST``: what one row-path look-up of a batch's keys in a side held as
columns alone costs more than in a dict history, in updates' worth of building that history;
the side builds its dict once its look-ups, with the updates its small batches' conversions
and merges have touched (``SortedRuns.churn``), have cost as much. Set by the rounds after a load
(``bench_rounds.py``: W3 4.24x fewer instructions than before, W4 0.875x; DECISIONS 11-29)."""

JOIN_BUDGET = 100_000
"""``JoinOperator.BUDGET``: output updates a join produces per activation before yielding to
the other actors (bounds a round's latency behind a large join; not a throughput figure)."""

RUNS_MAX_PENDING = 64
"""``SortedRuns.MAX_PENDING``: batches a join's side as columns has noted but not yet read
beyond which they are converted (or the runs given up). Issue #42's rounds after the load."""

RUNS_MAX_RECENT = 1024
"""``SortedRuns.MAX_RECENT``: updates of waiting batches held indexed by key for look-ups
instead of converted at the next read, so single-update rounds do not pay a conversion and its
merges at every read (``bench_rounds.py``, DECISIONS 11-29)."""

RUNS_COMPACT_ABOVE = 4096
"""``SortedRuns.COMPACT_ABOVE``: updates held beyond which ``tidy`` checks that the runs can
be compacted (then twice as many): a small side that cannot keeps its columns."""

RUNS_FEW_KEYS = 16
"""``join/kernel._FEW_KEYS``: keys looked up at most which each is searched alone in the runs'
memoryviews; more are gathered by numpy in one pass (W4 rounds after the load: 392.0e6 with
numpy, 390.1e6 with memoryviews; RESULTS, W4)."""

DELTA_BUDGET = 100_000
"""``delta/rule.py`` ``BUDGET``: records a delta query's lookup makes per activation before
the others may run (a hub's round spread over activations)."""

DELTA_CHUNK = 64
"""``delta/rule.py`` ``CHUNK``: records a phase takes at once: a hub key's proposals for a
chunk stay a few megabytes, and per-chunk costs vanish (W3 hub, RESULTS)."""

DELTA_COMPACT_ABOVE = 4096
"""``IndexStore.COMPACT_ABOVE``: a delta-query index is compacted once it holds more updates
than this, and then whenever it has doubled."""

# -- traces: batches, merges, probes -----------------------------------------------------------

BATCH_TINY = 32
"""``Batch.TINY``: up to this many updates, ``from_columns`` builds a list batch (sorting a few
rows in Python and reading them through a dict costs less than any numpy call)."""

BATCH_SMALL = 48
"""``Batch.SMALL``: up to this many updates, int columns are sorted and consolidated in plain
Python (a dozen numpy calls cost more)."""

BATCH_FEW = 32
"""``Batch.FEW``: up to this many rows found in a large numpy batch, look-ups read them element
by element instead of with vectorised gathers."""

BATCH_MANY_PROBES = 16
"""``Batch.MANY_PROBES``: a small batch answers a spine's ``lookup_many`` of more keys than
this by looking its own keys up among the probes (with :data:`BATCH_PROBES_PER_KEY`)."""

BATCH_PROBES_PER_KEY = 4
"""``Batch.PROBES_PER_KEY``: ...when there are more than this many probes per key it holds."""

BATCH_CACHED_ROWS = 1024
"""``Batch.CACHED_ROWS``: batches up to this size keep a dict from key to rows once read."""

BATCH_CACHE_AFTER = 8
"""``Batch.CACHE_AFTER``: a small numpy batch builds that dict (decoding every row) after this
many reads; few reads never pay a full decode."""

BATCH_LIST_ROWS = 256
"""``Batch.LIST_ROWS``: list batches up to this size may be encoded when they meet an encoded
batch in a merge; two list batches of at most this many updates merge in plain Python.
Small trace batches as lists: building one of 8 rows 25 -> 6 us (DECISIONS 11-22)."""

MERGE_SMALL = 64
"""``Merger.SMALL_MERGE``: merges of at most this many updates (or giving at most this many)
run at once in plain Python and give a list batch; 0 turns it off."""

MERGE_MIN_STEP = 1024
"""``Merger.MIN_STEP``: fewest updates a numpy merge step consumes (numpy's per-call overhead
dwarfs tiny steps)."""

MERGE_MIN_OBJECT_STEP = 32
"""``Merger.MIN_OBJECT_STEP``: fewest updates a Python-list merge step consumes."""

MERGE_MAX_STEP = 1 << 16
"""``Merger.MAX_STEP``: most updates one merge step consumes (bounds a step's temporary
memory)."""

SPINE_FUEL_PER_UPDATE = 8
"""``Spine.FUEL_PER_UPDATE``: fuel each inserted update gives every merge in progress, so that
merges finish before the next level fills (the spine's amortisation invariant)."""

PROBES_FEW = 64
"""``probes.py`` ``FEW_PROBES``: up to this many keys are checked and encoded in plain Python,
numpy beyond."""

CODEC_CACHE_LIMIT = 1 << 16
"""``Codec.CACHE_LIMIT``: interned products kept per codec before the cache is emptied (it only
saves allocations)."""

CODECS_KEPT = 4096
"""``codec._CODECS_LIMIT``: codecs kept by shape before the table is emptied."""

# -- progress and scheduling -------------------------------------------------------------------

COUNTS_SORTED_AT = 24
"""``coords`` ``SORTED_AT``: past this many counted times, the positive ones are kept sorted
as well (a frontier read without a scan)."""

TIME_CACHE_SIZE = 4096
"""``ProgressTracker.TIME_CACHE_SIZE``: coordinate tuples and frontiers remembered so reports
reuse time objects; each memo is cleared past this size."""

ACTIVATIONS_PER_STEP = 1_000
"""``Worker.ACTIVATIONS_PER_STEP``: activations one step may run before exchanging progress and
yielding to trio: a chain of actors runs in one step, a loop re-activating itself still lets
other tasks (and cancellation) in."""

SLICE_S = 0.002
"""``Worker.SLICE_S``: seconds a worker keeps stepping before it yields to trio. Stepping actors
in a loop rather than a task each saves 12-20 us a hop (DECISIONS 11-22); the slice bounds the
wait of the other in-process workers."""

RIGHTS_KEPT = 8
"""``Actor.RIGHTS_KEPT``: an output's send rights are reduced to their minimal times once they
are more than this many."""

GC_THRESHOLD = 250_000
"""``collector.GC_THRESHOLD``: the collector's first threshold while jobs run (Python's default
is 700). A static W2 run made no young passes instead of five; W4 load 2.05 -> 1.84 s
(DECISIONS 11-24)."""

ROUNDS_PER_LEVEL = 256
"""``graphs.ROUNDS_PER_LEVEL``: rounds between the priority levels of ``propagate_at``; 1, 16
and 64 measured the same within noise on ``bench_scc.py`` (DECISIONS 11-28)."""

# -- across processes --------------------------------------------------------------------------

TCP_READ_CHUNK = 1 << 16
"""``tcp._CHUNK``: reads smaller than this go through the link's buffer (many small frames per
system call); larger ones are received straight into the frame's memory. With one ``writev``
per frame: system calls of W2 at ``processes=2`` 94.6K -> 69.0K (DECISIONS 11-25)."""

SPLIT_FRAME = 1 << 26
"""``tcp.SPLIT_FRAME``: a frame of several messages longer than this is sent as several."""

PART = 1 << 17
"""``tcp.PART``: an update batch longer than this crosses in parts of this size, so the receiver
unpickles one part while the sender pickles the next (``tcp.batch``, RESULTS: 1.02x a pickle
round trip)."""

# -- checkpoints -------------------------------------------------------------------------------

LONGEST_CHAIN = 16
"""``checkpoint.LONGEST_CHAIN``: an index is written whole again once this many partial
segments follow the whole one (a resume reads the chain)."""

LOGGED_PER_ROW = 3
"""``checkpoint.LOGGED_PER_ROW``: a history is written whole again once its logs would hold this
many rows per row it holds. W2 checkpoints' CPU 0.167 -> 0.098 of the rounds' (DECISIONS
11-28)."""

DICTIONARY_RATIO = 4
"""``durable/columns.py``: a column is dictionary-encoded when it has at most one distinct value
per this many rows."""

PACK_CHUNK = 65_536
"""``durable/columns.py``: ints converted per ``struct.pack`` call (its arguments are a tuple):
bounds the temporary tuple; ``struct.pack`` is ~100 instructions an int against ~280 for
``numpy.asarray`` (DECISIONS 11-28)."""

PAIR_PACK_MIN = 16
"""``PairDomain.to_columns``: from this many pair times their coordinates go to int64 through
``struct.pack`` (fewer instructions per int than ``numpy.asarray``), below it through
``numpy.asarray`` (a smaller fixed cost per call); the two cross at about 12 pairs."""

DEFAULT_MAX_BUFFER = 1024
"""``handles.DEFAULT_MAX_BUFFER``: completed times a subscription holds for a reader that has not
taken them, unless told otherwise (memory against a slow reader's stalls)."""
