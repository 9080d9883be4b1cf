"""Networking: a job's workers in several processes or on several hosts, and the connections
between them.

One module per concept:

* :mod:`.processes` - ``processes=P``: the workers in P fresh interpreters on this host,
  driven from the caller's trio loop (the caller's placement, :class:`~.processes.Processes`);
* :mod:`.process_worker` - one of those interpreters: it serves the caller's jobs, each
  placed as a peer that reports to the caller (:class:`~.process_worker.WorkerProcess`);
* :mod:`.peer` - one process of a dataflow spread over several, hosting a block of workers
  (:class:`~.peer.PeerPlacement`; a Spark task runs one with ``run_peer`` or ``open_peer``);
* :mod:`.mesh` - rendezvous: the processes of one dataflow find each other and connect a full
  mesh;
* :mod:`.tcp` - framed messages over TCP, and the transport built on them;
* :mod:`.handshake` - both ends of a connection prove they hold the job's secret before
  anything on it is decoded;
* :mod:`.door` - the door of a listening port: who may wait to authenticate;
* :mod:`.tls` - TLS for connections across a network that is not trusted;
* :mod:`.remote_errors` - errors reported where raised, raised again where awaited.
"""
