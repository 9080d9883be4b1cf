"""Local execution: the workers of one process, each stepping its copy of the dataflow's
actors, and the plan they run.

One module per concept:

* :mod:`.plan` - from the graph a pipeline described to the graph that runs: fusion and
  progress wiring;
* :mod:`.worker` - :class:`~.worker.Worker`: one copy of the actors, stepped cooperatively in
  one trio task, exchanging progress;
* :mod:`.actor` - :class:`~.actor.Actor`: one operator instance on one worker, its mailboxes,
  routing and send rights;
* :mod:`.exchange` - a message cut by the worker that owns each datum's key, in one pass;
* :mod:`.bell` - :class:`~.bell.Bell`, what an idle worker sleeps on until a message, a
  frame or a feed wakes it;
* :mod:`.capability` - capabilities, the right to send at a time, minted only by the runtime;
* :mod:`.transport` - how workers reach each other (:class:`~.transport.InProcessTransport`
  here; :mod:`deltaflow.scheduler.net.tcp` across processes).

Nothing here imports the job API (:mod:`deltaflow.scheduler.job`) or the network
(:mod:`deltaflow.scheduler.net`).
"""
