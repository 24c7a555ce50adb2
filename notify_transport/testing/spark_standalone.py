"""A Spark standalone cluster (one master, workers) from pyspark's own ``spark-class``.

For trying the pipeline's cluster mode on one machine and for its tests:
``pip install pyspark`` ships the master and worker classes, so no separate
Spark download is needed. Processes are started on 127.0.0.1 with their logs
in ``work_dir`` and stopped (terminated, then killed) on :meth:`close`.

    with StandaloneCluster(work_dir) as cluster:
        ... --master cluster.master_url ...
"""
from __future__ import annotations

import logging
import os
import subprocess
import time
from pathlib import Path

from notify_transport.testing.brokers import free_port, free_ports

LOG = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """The folder of the installed pyspark, which holds ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    """A master and ``workers`` workers on 127.0.0.1, started through ``spark-class``."""

    def __init__(self, work_dir: str | os.PathLike, workers: int = 1, cores: int = 2, memory: str = "1g",
                 timeout: float = 120.0) -> None:
        self.work_dir = Path(work_dir)
        self.workers, self.cores, self.memory, self.timeout = workers, cores, memory, timeout
        self.port = free_port()
        self.processes: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.work_dir / f"{name}.log"
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_NO_DAEMONIZE": "1"}
        with open(log_path, "wb") as log:
            process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=env,
                                       stdout=log, stderr=subprocess.STDOUT, cwd=self.work_dir,
                                       start_new_session=True)
        self.processes.append(process)
        return process, log_path

    def _wait_for(self, process: subprocess.Popen, log_path: Path, text: str) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if text in log_path.read_text(errors="replace"):
                return
            if process.poll() is not None:
                break
            time.sleep(0.3)
        raise RuntimeError(f"{log_path.stem} did not start (waited for {text!r}); its log:\n"
                           + log_path.read_text(errors="replace")[-3000:])

    def start(self) -> "StandaloneCluster":
        ui_ports = free_ports(1 + self.workers, avoid={self.port})
        try:
            master, master_log = self._start("master", MASTER_CLASS, "--host", "127.0.0.1", "--port",
                                             str(self.port), "--webui-port", str(ui_ports[0]))
            self._wait_for(master, master_log, "I have been elected leader")
            for number in range(self.workers):
                worker, worker_log = self._start(
                    f"worker-{number}", WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(self.cores),
                    "--memory", self.memory, "--webui-port", str(ui_ports[1 + number]),
                    "--work-dir", str(self.work_dir / f"worker-{number}"), self.master_url)
                self._wait_for(worker, worker_log, "Successfully registered with master")
        except BaseException:
            self.close()
            raise
        LOG.info("Spark standalone cluster at %s with %d worker(s)", self.master_url, self.workers)
        return self

    def close(self) -> None:
        """Stop the processes this cluster started, workers first."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in reversed(self.processes):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        self.processes.clear()

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
