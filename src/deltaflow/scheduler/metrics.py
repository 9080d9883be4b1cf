"""A job's statistics as Prometheus metrics: ``df.open(..., metrics=PORT)``, CLI ``--metrics``.

The endpoint is ``prometheus_client``'s HTTP server (a thread); each scrape asks the job's
own trio loop for :meth:`~deltaflow.Job.statistics` (``trio.from_thread``), so the numbers
are read where they are kept, never while an actor changes them. The server runs while the
job's ``async with`` block does. It binds the loopback interface unless told otherwise: the
metrics are counts and frontiers (no data), but anyone who reaches the port reads them.

Metrics (each labelled by its input, output, operator or worker):

* ``deltaflow_input_records_total{input, outcome}``: records offered to an input, by
  ``outcome``: ``read`` (all), ``accepted``, ``refused``, ``skipped``, ``quarantined``;
* ``deltaflow_output_updates_total{output}``: consolidated updates an output published;
* ``deltaflow_output_frontier{output}``: the least time an output may still change at
  (``+Inf`` once complete);
* ``deltaflow_time``: the job's (inputs') time;
* ``deltaflow_late_records_total``: rows windows dropped as late, when the job counts them;
* ``deltaflow_arranged_updates{operator}``: updates an operator's arrangements hold;
* ``deltaflow_worker_activations_total{worker}``: operator activations per worker.

    >>> text = exposition({"time": 3, "inputs": {"xs": {"read": 2, "refused": 1}},
    ...                    "outputs": {"output": {"written": 5, "frontier": [3]}}})
    >>> 'deltaflow_input_records_total{input="xs",outcome="refused"} 1.0' in text
    True
    >>> 'deltaflow_output_frontier{output="output"} 3.0' in text
    True
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import trio

__all__ = ["MetricsServer", "check_metrics", "exposition"]

LOOPBACK = "127.0.0.1"


def check_metrics(metrics: object) -> tuple[str, int]:
    """``metrics`` (a port, or ``(host, port)``) as ``(host, port)``.

    >>> check_metrics(9100), check_metrics(("0.0.0.0", 0))
    (('127.0.0.1', 9100), ('0.0.0.0', 0))

    Raises:
        ValueError: not a port in 0..65535 nor a ``(host, port)`` pair.
    """
    host: object = LOOPBACK
    port: object = metrics
    if isinstance(metrics, tuple) and len(metrics) == 2:
        host, port = metrics
    if not isinstance(host, str) or not isinstance(port, int) or isinstance(port, bool):
        port = -1
    if not 0 <= port <= 65535:
        msg = f"metrics must be a port (0..65535) or a (host, port) pair, not {metrics!r}"
        raise ValueError(msg)
    return str(host), port


def _families(stats: Mapping[str, Any]) -> Iterator[Any]:
    """The metric families of one :meth:`Job.statistics`."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    records = CounterMetricFamily(
        "deltaflow_input_records",
        "Records offered to an input, by outcome (read: all of them)",
        labels=["input", "outcome"],
    )
    for name, counts in stats.get("inputs", {}).items():
        for outcome in ("read", "accepted", "refused", "skipped", "quarantined"):
            if outcome in counts:
                records.add_metric([name, outcome], counts[outcome])
    yield records
    written = CounterMetricFamily(
        "deltaflow_output_updates", "Consolidated updates an output published", labels=["output"]
    )
    frontier = GaugeMetricFamily(
        "deltaflow_output_frontier",
        "The least time an output may still change at (+Inf: complete)",
        labels=["output"],
    )
    for name, out in stats.get("outputs", {}).items():
        written.add_metric([name], out.get("written", 0))
        times = [t for t in out.get("frontier", []) if isinstance(t, int)]
        frontier.add_metric([name], min(times) if times else math.inf)
    yield written
    yield frontier
    if "time" in stats:
        yield GaugeMetricFamily("deltaflow_time", "The job's (inputs') time", value=stats["time"])
    late = stats.get("late")
    if isinstance(late, int):
        yield CounterMetricFamily(
            "deltaflow_late_records", "Rows windows dropped as late", value=late
        )
    elif isinstance(late, Mapping):
        family = CounterMetricFamily(
            "deltaflow_late_records", "Rows windows dropped as late", labels=["operator"]
        )
        for name, n in late.items():
            if isinstance(n, int):
                family.add_metric([str(name)], n)
        yield family
    arranged = GaugeMetricFamily(
        "deltaflow_arranged_updates",
        "Updates an operator's arrangements hold",
        labels=["operator", "index"],
    )
    for i, op in enumerate(stats.get("operators", [])):
        arranged.add_metric([op.get("name", "?"), str(i)], op.get("arranged", 0))
    yield arranged
    activations = CounterMetricFamily(
        "deltaflow_worker_activations", "Operator activations per worker", labels=["worker"]
    )
    for i, w in enumerate(stats.get("workers", [])):
        activations.add_metric([str(i)], w.get("activations", 0))
    yield activations


def exposition(stats: Mapping[str, Any]) -> str:
    """``stats`` (a :meth:`Job.statistics`) in Prometheus's text format."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(lambda: stats))
    return generate_latest(registry).decode("utf-8")


@attrs.define(eq=False)
class _Collector:
    """A ``prometheus_client`` collector of whatever ``read()`` returns."""

    read: Callable[[], Mapping[str, Any]]

    def collect(self) -> Iterator[Any]:
        yield from _families(self.read())


@attrs.define(eq=False)
class MetricsServer:
    """Serves ``statistics`` (the job's, called in its trio loop) on ``host:port``.

    Start it from inside the job's trio loop (:meth:`start`); :meth:`stop` when the job ends.
    """

    statistics: Callable[[], Mapping[str, Any]]
    host: str = LOOPBACK
    port: int = 0
    _token: Any = None
    _server: Any = None
    _thread: Any = None
    _last: Mapping[str, Any] = attrs.field(factory=dict)

    def start(self) -> str:
        """Bind and serve; returns the URL (with the port chosen when ``port`` is 0).

        Raises:
            ImportError: ``prometheus_client`` is not installed (``pip install
                deltaflow[metrics]``).
            OSError: the port cannot be bound.
        """
        try:
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError as exc:
            msg = "metrics= needs prometheus_client: pip install 'deltaflow[metrics]'"
            raise ImportError(msg) from exc
        self._token = trio.lowlevel.current_trio_token()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self._read))
        self._server, self._thread = start_http_server(self.port, self.host, registry)
        self.port = int(self._server.server_address[1])
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def _read(self) -> Mapping[str, Any]:
        """The job's statistics, taken in its trio loop (the last ones once it has ended)."""
        with contextlib.suppress(trio.RunFinishedError, RuntimeError):
            self._last = trio.from_thread.run_sync(self.statistics, trio_token=self._token)
        return self._last

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
            self._server = None
