"""The scheduler: how a pipeline runs, from ``df.run`` down to the workers and the wire.

The job API, one module per concept:

* :mod:`.runtime` - the entry points: ``open()`` inside a trio program, ``run()`` for a batch;
* :mod:`.job` - :class:`~.job.Job`: the workers, the application's handles, waiting for
  conditions, advancing time, checkpoints and statistics;
* :mod:`.running` - :class:`~.running.OpenJob`, the ``async with`` that runs a job's workers
  as tasks of a nursery;
* :mod:`.placement` - where a job's workers run (:class:`~.placement.InProcess`, processes,
  peers) and all that follows from it, as an object the job is given;
* :mod:`.handles` - an input to feed, an output to read, a subscription to completed times;
* :mod:`.feed` - feeding a job the checked updates ``run()`` was given;
* :mod:`.validation` - checking times, data, diffs and batches, naming the input at fault.

Where the workers run:

* :mod:`.local` - the workers of one process, the actors they step and the plan they run;
* :mod:`.net` - a job's workers in several processes or on several hosts, and the
  connections between them.

Durable state:

* :mod:`.checkpoint` - taking and resuming checkpoints, each process's share of them;
* :mod:`.state_layout` - a job's state named independently of its workers and processes.

Inputs and outputs the job handles itself:

* :mod:`.sources` - inputs a job feeds itself, resuming from offsets its checkpoints keep;
* :mod:`.sinks` - outputs a job writes out itself, each closed time once;
* :mod:`.accounting` - per input, the records read, refused and set aside;
* :mod:`.frames` - the column conventions of DataFrames and of CSV / JSON-lines files.

Observation:

* :mod:`.observe` - log records, per-operator counts, worker statistics, the progress line;
* :mod:`.metrics` - a job's statistics as Prometheus metrics;
* :mod:`.dashboard` - a job's live dashboard, served from its own trio loop;
* :mod:`.graph` - a picture of the planned dataflow (Mermaid, Graphviz DOT);
* :mod:`.collector` - the cyclic garbage collector while jobs run.
"""
