"""Rendezvous: processes that will run one dataflow find each other and connect a full mesh.

Each process (a *peer*) binds a listening port, publishes its ``host:port`` and learns every
peer's address, in peer order, from a rendezvous it is given: the parent job for local
worker processes, one ``allGather`` of a Spark barrier stage for the Spark adapter. Peer ``i``
then dials every peer ``j < i`` and accepts a connection from every ``j > i``; the first
frame on each connection says who dials and which dataflow it runs (a digest of the plan), so
peers running different pipelines fail at once, naming each other, instead of exchanging
nonsense.

    >>> import trio
    >>> async def two_peers():
    ...     addresses = {}
    ...     async def peer(i):
    ...         async def rendezvous(address):
    ...             addresses[i] = address
    ...             while len(addresses) < 2:
    ...                 await trio.sleep(0.01)
    ...             return [addresses[0], addresses[1]]
    ...         links = await connect_mesh(i, 2, rendezvous, "same-plan")
    ...         for link in links.values():
    ...             await link.aclose()
    ...         return sorted(links)
    ...     async with trio.open_nursery() as n:
    ...         n.start_soon(peer, 0)
    ...         n.start_soon(peer, 1)
    >>> trio.run(two_peers)
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import trio

from .tcp import Link

if sys.version_info < (3, 11):  # pragma: no cover - trio brings the backport there
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from .plan import Plan

__all__ = ["connect_mesh", "plan_digest"]

Rendezvous = Callable[[str], Awaitable[Sequence[str]]]


def plan_digest(plan: Plan, workers: int) -> str:
    """A digest of what every peer must agree on: the physical graph and the worker count.

    Operator names carry the user functions' ``module.qualname:line``, so two pipelines that
    differ in any operator or wiring differ here.
    """
    h = hashlib.sha256()
    h.update(f"workers={workers};".encode())
    for node in plan.nodes:
        edges = [[(e.node, e.port) for e in port] for port in node.inputs]
        h.update(repr((node.name, edges, node.outputs, node.depth)).encode())
    return h.hexdigest()[:16]


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first error of a (nested) group: what one failed connection raised."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


async def connect_mesh(
    index: int,
    peers: int,
    rendezvous: Rendezvous,
    digest: str,
    host: str = "127.0.0.1",
) -> dict[int, Link]:
    """Bind ``host:0``, rendezvous, and return a :class:`Link` to every other peer.

    Raises:
        ValueError: a peer runs another dataflow (its digest differs).
    """
    listeners = await trio.open_tcp_listeners(0, host=host)
    listener = listeners[0]
    for extra in listeners[1:]:
        await extra.aclose()
    port = listener.socket.getsockname()[1]
    links: dict[int, Link] = {}
    try:
        addresses = list(await rendezvous(f"{host}:{port}"))
        if len(addresses) != peers:
            msg = f"rendezvous returned {len(addresses)} addresses for {peers} peers"
            raise ValueError(msg)

        def check(other: int, other_digest: str) -> None:
            if other_digest != digest:
                msg = (
                    f"peer {index} runs dataflow {digest} but peer {other} runs "
                    f"{other_digest}: every peer must run the same pipeline and worker count"
                )
                raise ValueError(msg)

        async def dial(j: int) -> None:
            stream = await trio.open_tcp_stream(*_split_address(addresses[j]))
            link = Link(stream, j)
            await link.send_frame(("hello", index, digest))
            links[j] = link
            _, other, other_digest = await link.receive()
            check(other, other_digest)

        async def greet(stream: trio.SocketStream) -> None:
            link = Link(stream, -1)
            _, other, other_digest = await link.receive()
            link.peer = other
            links[other] = link
            await link.send_frame(("hello", index, digest))
            check(other, other_digest)

        try:
            async with trio.open_nursery() as nursery:
                for j in range(index):
                    nursery.start_soon(dial, j)
                for _ in range(index + 1, peers):  # one accepting task: a socket has one reader
                    nursery.start_soon(greet, await listener.accept())
        except BaseExceptionGroup as group:
            raise _first(group) from None
    except BaseException:
        for link in links.values():
            await trio.aclose_forcefully(link.stream)
        raise
    finally:
        await listener.aclose()
    return links
