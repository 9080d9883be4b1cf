"""One process of a dataflow spread over several: a *peer* of a mesh, hosting a block of workers.

:class:`PeerPlacement` places a :class:`~deltaflow.scheduler.job.Job` (see
:mod:`deltaflow.scheduler.placement`) so that it runs only workers
``[index * local, (index + 1) * local)`` of ``peers * local`` and reaches the others through a
:class:`~deltaflow.scheduler.net.tcp.TcpTransport`. Its inputs take only this peer's updates (the
dataflow's exchanges route them to their owners); its outputs hold what reached this peer's
workers.

Two entry points serve a peer that has nobody above it (a Spark barrier task; see the
Spark adapter): :func:`run_peer` runs a batch of updates
to completion, :func:`open_peer` keeps the dataflow running and closes one time per
:meth:`Peer.step`. Both exchange every output by its data before the sink, so equal data
meet on one peer and the peers' results, put together, are ``df.run``'s output.

    >>> import deltaflow as df
    >>> class Lengths(df.Pipeline):
    ...     def build(self, words):
    ...         return words.map(len)
    >>> run_peer(Lengths(), index=0, peers=1, rendezvous=lambda me: [me],
    ...          secret=b"a secret all peers share", feed={"words": [("cat", 0, 1), ("dog", 0, 1)]})
    [(3, 0, 2)]
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import trio

from .. import observe
from ..checkpoint import Capture, counters
from ..collector import GC_THRESHOLD, check_gc_threshold
from ..feed import run_to_end
from ..job import Job, OpenJob
from ..placement import Placement
from ..validation import validate_updates
from .door import Door
from .handshake import check_secret
from .mesh import CONNECT_TIMEOUT_S, Rendezvous, connect_mesh, plan_digest
from .tcp import Link, TcpTransport

if TYPE_CHECKING:
    from ...operators.builder import DataflowBuilder
    from ...operators.io import InputFeed
    from ...operators.pipeline import Pipeline
    from ..checkpoint import Checkpointer
    from ..local.transport import Transport
    from .tls import TLS

__all__ = ["Peer", "PeerPlacement", "open_peer", "peer_job", "run_peer"]

Updates = list[tuple[Any, Any, int]]
#: ``(secret, host, tls)``: how a peer's connections are made and authenticated.
_Security = tuple[bytes, str, "TLS | None"]


class PeerPlacement(Placement):
    """Workers ``[index * local, (index + 1) * local)`` of a job spread over ``peers`` peers,
    reaching the others through a :class:`~deltaflow.scheduler.net.tcp.TcpTransport`.

    Build a job with it (:func:`peer_job`), connect it with :meth:`connect` (after a
    rendezvous, which needs :attr:`digest`), then run it as any job
    (:class:`~deltaflow.scheduler.job.OpenJob`). A peer neither owns the checkpoint location
    nor commits checkpoints: whoever coordinates the peers does, from each peer's share
    (:meth:`idle_counts`, :meth:`save_share`).

        >>> placement = PeerPlacement(index=1, peers=2, local=2)
        >>> placement.hosted(4), placement.writer
        (range(2, 4), 'p1')
    """

    owns_location = False  # (whoever coordinates the peers does)
    commits = False  # its share is one of several: a coordinator commits them together
    hears_steps = True  # (says goodbye once its workers stop)

    def __init__(
        self, *, index: int, peers: int, local: int = 1, exchange_outputs: bool = True
    ) -> None:
        if not 0 <= index < peers:
            msg = f"peer index {index!r} is not in range({peers})"
            raise ValueError(msg)
        self.index = index
        self.peers = peers
        self.local = local
        self.writer = f"p{index}"
        self._exchange_outputs = exchange_outputs
        self._links: dict[int, Link] = {}
        self.tcp: TcpTransport | None = None
        #: The digest of the dataflow the job runs (the peers compare theirs as they connect).
        self.digest = ""
        #: The door of this peer's mesh port: what it refused and turned away.
        self.door = Door(f"peer {index}", 0)
        # This peer's share of the checkpoint last written, until the coordinator says
        # whether it was committed (see save_share).
        self._share: tuple[Capture, dict[str, Any], int] | None = None

    # -- the workers: a block of them, the others reached over TCP -------------------------
    def transport(self, job: Job) -> Transport:
        """The TCP transport (links are added by :meth:`connect`)."""
        self.tcp = TcpTransport(self.index, self.local, self._links, job.fail)
        return self.tcp

    def hosted(self, workers: int) -> range:
        return range(self.index * self.local, (self.index + 1) * self.local)

    def instantiate(self, pipeline: Pipeline, workers: int) -> DataflowBuilder:
        return pipeline.instantiate(workers, exchange_outputs=self._exchange_outputs)

    def built(self, job: Job) -> None:
        self.digest = plan_digest(job.plan, self.peers * self.local)

    def feeds(self, job: Job, name: str, feeds: list[InputFeed]) -> list[InputFeed]:
        """The hosted workers' feeds: this peer's inputs take only its own updates."""
        first = self.index * self.local
        return feeds[first : first + self.local]

    async def connect(
        self,
        rendezvous: Rendezvous,
        *,
        secret: bytes,
        host: str = "127.0.0.1",
        tls: TLS | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
    ) -> None:
        """Rendezvous with the other peers and connect the mesh, every connection
        authenticated with ``secret`` (see :func:`~deltaflow.scheduler.net.mesh.connect_mesh`)."""
        links = await connect_mesh(
            self.index,
            self.peers,
            rendezvous,
            self.digest,
            secret=secret,
            host=host,
            tls=tls,
            connect_timeout=connect_timeout,
            door=self.door,
        )
        self._links.update(links)

    # -- this peer's share of a checkpoint (a coordinator commits the whole) ----------------
    async def resume(self, job: Job, manifest: dict[str, Any]) -> None:
        """Take this peer's share of the checkpoint: its workers' state, and (the peer of
        worker 0) the outputs' updates at later times."""
        await job.restore(manifest, job.workers, current=False, pending=self.index == 0)

    async def idle_counts(self, job: Job) -> tuple[int, int]:
        """Wait until this peer's workers are idle; the messages and progress batches they
        have sent and received in all then.

        A coordinator asks every peer in turn; once two rounds return the same counts and
        the sums of sent and received agree, nothing is in flight anywhere and the dataflow
        is quiescent (no worker wakes again before more input): the moment to call
        :meth:`save_share` on every peer.
        """
        await job.wait_for(lambda: counters(job.workers)[0])
        _, sent, received = counters(job.workers)
        return sent, received

    async def save_share(self, job: Job, sequence: int, committed: int) -> dict[str, Any]:
        """Write this peer's share of checkpoint ``sequence`` (quiescent: see
        :meth:`idle_counts`); the manifest fragment for the coordinator's commit (with
        :meth:`.Job.header`). ``committed``: the last checkpoint the coordinator committed
        (what this peer wrote for an earlier one that was not committed is written again).

        Raises:
            CheckpointError: the share could not be written.
        """
        checkpointer = job.checkpointer
        if checkpointer is None:
            msg = "save_share(): this peer was started without checkpoint=LOCATION"
            raise ValueError(msg)
        self._promote(checkpointer, committed)
        try:
            capture = checkpointer.capture(
                job.layout,
                job.workers,
                job.builder.stores,
                current=False,
                pending=True,
                first=self.index * self.local,
            )
            fragment = await trio.to_thread.run_sync(checkpointer.write, capture, sequence)
        except BaseException:
            checkpointer.failed()
            raise
        self._share = (capture, fragment, sequence)
        return fragment

    def _promote(self, checkpointer: Checkpointer, committed: int) -> None:
        """What the share written last became: part of checkpoint ``committed``, or not."""
        share, self._share = self._share, None
        if share is None:
            return
        capture, fragment, sequence = share
        if sequence == committed:
            checkpointer.committed(capture, fragment, sequence)
        else:
            checkpointer.failed()

    # -- running ----------------------------------------------------------------------------
    def worker_statistics(self, job: Job) -> list[dict[str, Any]]:
        """This peer's workers, each saying it runs in process (peer) :attr:`index`."""
        return observe.worker_statistics(job, self.index)

    def failed(self, job: Job, exc: BaseException, *, first: bool) -> None:
        """Tell the other peers."""
        assert self.tcp is not None
        self.tcp.report_error(exc)

    def stepped(self, job: Job) -> None:
        """Once every hosted worker has stopped, say goodbye to the other peers."""
        if job.finished:
            assert self.tcp is not None
            self.tcp.finish()


def peer_job(
    pipeline: Pipeline,
    placement: PeerPlacement,
    *,
    fuse: bool = True,
    profile: bool = False,
    checkpoint: Any = None,
) -> Job:
    """A job of ``pipeline`` whose workers are those of ``placement`` (a peer's block of
    them), the others reached over its mesh once :meth:`PeerPlacement.connect` ran.

        >>> import deltaflow as df
        >>> class Same(df.Pipeline):
        ...     def build(self, xs):
        ...         return xs
        >>> len(peer_job(Same(), PeerPlacement(index=0, peers=2, local=3)).workers)
        3
    """
    workers = placement.peers * placement.local
    return Job(
        pipeline, workers, placement=placement, fuse=fuse, profile=profile, checkpoint=checkpoint
    )


class Peer:
    """A running peer fed one time per :meth:`step` (see :func:`open_peer`)."""

    def __init__(self, job: Job, placement: PeerPlacement) -> None:
        self.job = job
        self.placement = placement
        self._captures = {name: out.capture() for name, out in job.outputs.items()}

    @property
    def time(self) -> int:
        """The time the next :meth:`step` feeds."""
        return self.job.time

    async def step(
        self, updates: Mapping[str, Iterable[tuple[Any, int]]]
    ) -> Updates | dict[str, Updates]:
        """Feed this peer's ``(data, diff)`` updates at :attr:`time`, close that time on this
        peer, and return once every peer has closed it: the consolidated changes at that time
        of the output(s) that ended on this peer, ``[(data, time, diff)]``.

        Every peer must call it as many times as the others.
        """
        job = self.job
        time = job.time
        for name, pairs in updates.items():
            by_time = validate_updates(name, [(d, time, r) for d, r in pairs])
            if by_time:
                data, diffs = by_time[time]
                job.inputs[name].extend_checked(data, diffs)
        await job.advance_to(time + 1)
        result: dict[str, Updates] = {}
        for name, captured in self._captures.items():
            result[name] = [(d, t, r) for t, upds in captured for d, r in upds]
            captured.clear()
        return result["output"] if job.builder.single_output else result

    def statistics(self) -> dict[str, Any]:
        """:meth:`Job.statistics` of this peer's workers."""
        return self.job.statistics()

    # -- checkpoints (see open_peer) ---------------------------------------------------------
    @property
    def resumed_at(self) -> int | None:
        """The time this peer resumed at from a checkpoint (``None``: it started afresh)."""
        return self.job.resumed_at

    @property
    def door(self) -> Door:
        """The door of this peer's mesh port: what it refused and turned away."""
        return self.placement.door

    async def settle(self) -> tuple[int, int]:
        """:meth:`PeerPlacement.idle_counts`: once this peer's workers are idle, what they
        sent and received."""
        return await self.placement.idle_counts(self.job)

    async def save_share(self, sequence: int, committed: int) -> dict[str, Any]:
        """:meth:`PeerPlacement.save_share`: this peer's share of checkpoint ``sequence``."""
        return await self.placement.save_share(self.job, sequence, committed)

    def header(self, sequence: int) -> dict[str, Any]:
        """What the manifest of checkpoint ``sequence``, at this peer's time, says of the
        job (the same on every peer)."""
        return self.job.header(self.job.time, sequence)


def _threaded(rendezvous: Callable[[str], Sequence[str]]) -> Rendezvous:
    async def call(address: str) -> Sequence[str]:
        # A Spark allGather blocks: keep it off the trio loop.
        return await trio.to_thread.run_sync(rendezvous, address)

    return call


@contextlib.asynccontextmanager
async def _running(
    job: Job,
    placement: PeerPlacement,
    rendezvous: Rendezvous,
    security: _Security,
    connect_timeout: float,
    gc_threshold: int | None,
) -> AsyncIterator[Job]:
    secret, host, tls = security
    await placement.connect(
        rendezvous, secret=secret, host=host, tls=tls, connect_timeout=connect_timeout
    )
    async with OpenJob(job, check_gc_threshold(gc_threshold)) as running:
        assert running is job
        yield job


@contextlib.asynccontextmanager
async def open_peer(
    pipeline: Pipeline,
    *,
    index: int,
    peers: int,
    rendezvous: Callable[[str], Sequence[str]],
    secret: bytes | str,
    host: str = "127.0.0.1",
    tls: TLS | None = None,
    workers_per_peer: int = 1,
    fuse: bool = True,
    connect_timeout: float = 120.0,
    gc_threshold: int | None = GC_THRESHOLD,
    checkpoint: Any = None,
) -> AsyncIterator[Peer]:
    r"""Run peer ``index`` of ``peers`` inside trio, one time per :meth:`Peer.step`.

    ``rendezvous(my_address)`` returns every peer's ``"host:port"`` in index order (it may
    block: it runs in a thread). Every peer must be given the same ``secret`` (at least 16
    bytes; :func:`~deltaflow.scheduler.net.handshake.new_secret` makes one): the mesh admits
    only connections that prove they hold it. ``host`` is the address this peer binds and
    publishes; ``tls`` runs every connection over TLS. ``connect_timeout`` bounds the wait
    for the other peers after the rendezvous. Leaving the block closes the inputs and waits
    until the dataflow has finished on every peer.

    ``checkpoint``: the location of the job's durable state. The peer resumes its share from
    the checkpoint there, if any (:attr:`Peer.resumed_at`); checkpoints are taken by whoever
    coordinates the peers: every peer :meth:`Peer.settle`\ s until the counts agree
    (:func:`~deltaflow.scheduler.checkpoint.settled`), writes its share
    (:meth:`Peer.save_share`), and the coordinator commits the shares
    (:meth:`~deltaflow.scheduler.checkpoint.Checkpointer.commit`, with :meth:`Peer.header`).
    A peer neither locks the location nor checks the operators' code: the coordinator does,
    before the peers start (:meth:`~deltaflow.scheduler.checkpoint.Checkpointer.lock`,
    :func:`~deltaflow.scheduler.state_layout.check_code`), as a Spark stream's driver does.

    Raises:
        ValueError: the peers run different dataflows; a secret under 16 bytes.
        OperatorError: user code failed on some peer.
        PeerLostError: another peer went away, or did not connect in time.
    """
    placement = PeerPlacement(index=index, peers=peers, local=workers_per_peer)
    job = peer_job(pipeline, placement, fuse=fuse, checkpoint=checkpoint)
    security = (check_secret(secret), host, tls)
    rendezvous_ = _threaded(rendezvous)
    async with _running(job, placement, rendezvous_, security, connect_timeout, gc_threshold):
        yield Peer(job, placement)


def run_peer(
    pipeline: Pipeline,
    *,
    index: int,
    peers: int,
    rendezvous: Callable[[str], Sequence[str]],
    secret: bytes | str,
    feed: Mapping[str, Iterable[tuple[Any, Any, int]]] | None = None,
    host: str = "127.0.0.1",
    tls: TLS | None = None,
    workers_per_peer: int = 1,
    fuse: bool = True,
    connect_timeout: float = 120.0,
    gc_threshold: int | None = GC_THRESHOLD,
) -> Updates | dict[str, Updates]:
    """Run peer ``index`` of ``peers`` over this peer's complete inputs (``feed``: per input,
    ``(data, time, diff)`` as for ``df.run``) and return the consolidated output updates that
    ended on this peer; concatenated over all peers they are ``df.run``'s output.
    ``rendezvous``, ``secret``, ``host``, ``tls`` and ``connect_timeout`` are as for
    :func:`open_peer`.

    Synchronous: it runs its own trio loop (call it from a Spark task's function).

    Raises:
        TypeError, ValueError: a malformed input; or the peers run different dataflows.
        OperatorError: user code failed on some peer.
        PeerLostError: another peer went away.
    """
    placement = PeerPlacement(index=index, peers=peers, local=workers_per_peer)
    job = peer_job(pipeline, placement, fuse=fuse)
    names = pipeline.input_names()
    feed = dict(feed or {})
    unknown = sorted(set(feed) - set(names))
    if unknown:
        msg = f"unknown input(s) {unknown}; {type(pipeline).__name__}.build() takes {names}"
        raise TypeError(msg)
    validated = {name: validate_updates(name, updates) for name, updates in feed.items()}
    security = (check_secret(secret), host, tls)

    async def main() -> dict[str, Updates]:
        rendezvous_ = _threaded(rendezvous)
        async with _running(job, placement, rendezvous_, security, connect_timeout, gc_threshold):
            return await run_to_end(job, validated)

    result = trio.run(main)
    return result["output"] if job.builder.single_output else result
