"""A Spark standalone cluster on this machine: a master and its workers, each its own JVM.

Local mode (``local[n]``) runs the executors inside the driver's JVM, in the driver's working
directory, so it hides what a real cluster does not forgive: executors that cannot import the
driver's modules, tasks on different executors that must reach each other over the network.
:class:`StandaloneCluster` starts a real one from pyspark's own ``bin/spark-class``
(``org.apache.spark.deploy.master.Master`` and ``...deploy.worker.Worker``), every process on
loopback and each executor in a working directory of its own, for the tests and benchmarks
that need one::

    with StandaloneCluster(directory, workers=2, cores=2) as cluster:
        spark = cluster.session()
        ...
        spark.stop()

It needs Java (what pyspark itself needs); each worker offers ``cores`` task slots and runs
one executor per application.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ._session import local_session
from ._slots import total_slots

__all__ = ["StandaloneCluster", "spark_class"]

_MASTER_AT = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = re.compile("Successfully registered with master")


def spark_class() -> Path:
    """pyspark's ``bin/spark-class``, which starts Spark's JVM programs."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


@attrs.define(eq=False)
class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` slots and ``memory`` for executors each),
    started by :meth:`start` with their logs and working directories under ``directory``,
    ended by :meth:`stop`."""

    directory: Path
    workers: int = 2
    cores: int = 2
    #: What each worker offers its executors (each executor takes ``executor_memory``).
    memory: str = "1g"
    executor_memory: str = "512m"
    #: The heap of the master's and the workers' own JVMs.
    daemon_memory: str = "256m"
    master_url: str | None = None
    #: Seconds a master, a worker or the executors may take to start.
    START_TIMEOUT_S = 120.0
    _processes: list[subprocess.Popen[bytes]] = attrs.field(factory=list)

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(
            SPARK_HOME=str(spark_class().parent.parent),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY=self.daemon_memory,
        )
        return env

    def _launch(self, name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.directory / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(spark_class()), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._environment(),
                cwd=self.directory,
            )
        self._processes.append(process)
        return process, log

    def _wait_for(
        self, process: subprocess.Popen[bytes], log: Path, pattern: re.Pattern[str]
    ) -> re.Match[str]:
        """The first match of ``pattern`` in the log; fails if the process ends first."""
        deadline = time.monotonic() + self.START_TIMEOUT_S
        while True:
            text = log.read_text(errors="replace")
            match = pattern.search(text)
            if match:
                return match
            if process.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(text.splitlines()[-20:])
                msg = f"{log.stem} did not start (see {log}):\n{tail}"
                raise RuntimeError(msg)
            time.sleep(0.1)

    def start(self) -> str:
        """Start the master, then the workers; return the master's URL once every worker
        has registered.

        Raises:
            RuntimeError: a process did not start (with the end of its log).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            master, log = self._launch(
                "master", "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
            )  # fmt: skip
            self.master_url = self._wait_for(master, log, _MASTER_AT).group(1)
            started = []
            for w in range(self.workers):
                options = [
                    "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(self.directory / f"work{w}"),
                ]  # fmt: skip
                worker = "org.apache.spark.deploy.worker.Worker"
                started.append(self._launch(f"worker{w}", worker, *options, self.master_url))
            for process, worker_log in started:
                self._wait_for(process, worker_log, _REGISTERED)
        except BaseException:
            self.stop()
            raise
        return self.master_url

    def session(self, app_name: str = "deltaflow", config: Mapping[str, str] | None = None) -> Any:
        """A SparkSession on this cluster (see :func:`~._session.local_session`), returned once
        every worker's executor has registered: all ``workers * cores`` slots are there.

        Raises:
            RuntimeError: the executors did not all register in time.
        """
        assert self.master_url is not None, "start() the cluster first"
        slots = self.workers * self.cores
        settings = {
            "spark.executor.memory": self.executor_memory,
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(slots),
            **(config or {}),
        }
        spark = local_session(self.master_url, app_name, settings)
        deadline = time.monotonic() + self.START_TIMEOUT_S
        while total_slots(spark.sparkContext) < slots:
            if time.monotonic() > deadline:
                spark.stop()
                msg = (
                    f"the cluster's executors offer fewer than {slots} slots after "
                    f"{self.START_TIMEOUT_S} s"
                )
                raise RuntimeError(msg)
            time.sleep(0.1)
        return spark

    def stop(self) -> None:
        """End the workers, then the master (their executors end with them)."""
        processes, self._processes = self._processes, []
        for process in reversed(processes):
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
