"""Start benchmark workers as subprocesses, talk to them, and always kill them.

Every :class:`Worker` runs in its own session (process group) and is
registered in a module-level set so that :func:`kill_all` (called from the
orchestrator's ``finally`` and at exit) can end it and its children.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from bench.worker import RESULT_PREFIX, SIGNAL_PREFIX

LOG = logging.getLogger(__name__)
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_live: set["Worker"] = set()
_live_lock = threading.Lock()


class WorkerError(RuntimeError):
    """A worker failed, timed out or said something unexpected."""


class Worker:
    """``python -m bench.worker module:function '<json>'`` with a reader thread."""

    def __init__(self, target: str, kwargs: dict[str, Any], name: str | None = None,
                 python: str | None = None) -> None:
        self.name = name or target
        self.events: "queue.Queue[tuple[str, Any]]" = queue.Queue()
        self._stderr_tail: list[str] = []
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        cmd = [python or sys.executable, "-m", "bench.worker", target, json.dumps(kwargs)]
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        with _live_lock:
            _live.add(self)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def __repr__(self) -> str:
        return f"<Worker {self.name} pid={self.proc.pid}>"

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(RESULT_PREFIX):
                self.events.put(("result", json.loads(line[len(RESULT_PREFIX):])))
            elif line.startswith(SIGNAL_PREFIX):
                self.events.put(("signal", line[len(SIGNAL_PREFIX):].strip()))
            else:
                LOG.debug("%s: %s", self.name, line.rstrip())
        self.events.put(("eof", None))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr_tail.append(line.rstrip())
            del self._stderr_tail[:-40]
            LOG.debug("%s stderr: %s", self.name, line.rstrip())

    def stderr_tail(self, lines: int = 15) -> str:
        return "\n".join(self._stderr_tail[-lines:])

    def send(self, command: str) -> None:
        """Write one command line to the worker's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def _next(self, deadline: float) -> tuple[str, Any]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkerError(f"{self.name}: timed out\n{self.stderr_tail()}")
        try:
            return self.events.get(timeout=left)
        except queue.Empty:
            raise WorkerError(f"{self.name}: timed out\n{self.stderr_tail()}") from None

    def wait_signal(self, name: str, timeout: float) -> None:
        """Block until the worker signals ``name``; error if it ends or times out first."""
        deadline = time.monotonic() + timeout
        while True:
            kind, value = self._next(deadline)
            if kind == "signal" and value == name:
                return
            if kind == "result":
                self.events.put((kind, value))  # keep it for result()
                raise WorkerError(f"{self.name} ended before {name!r}: {value}")
            if kind == "eof":
                raise WorkerError(f"{self.name} exited ({self.proc.wait()}) before {name!r}\n"
                                  f"{self.stderr_tail()}")

    def result(self, timeout: float) -> dict[str, Any]:
        """The worker's result dict; the process is reaped (and killed on timeout)."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                kind, value = self._next(deadline)
                if kind == "result":
                    return value
                if kind == "eof":
                    raise WorkerError(f"{self.name} exited ({self.proc.wait()}) without a "
                                      f"result\n{self.stderr_tail()}")
        finally:
            self.kill()

    def kill(self, grace: float = 2.0) -> None:
        """End the worker and everything it started (SIGTERM, then SIGKILL)."""
        if self.proc.poll() is None:
            try:
                if self.proc.stdin:
                    self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=min(grace, 0.5))
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    _signal_group(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=5)
        else:
            _signal_group(self.proc.pid, signal.SIGKILL)  # stray children of a dead leader
        with _live_lock:
            _live.discard(self)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_worker(target: str, kwargs: dict[str, Any], timeout: float, name: str | None = None) -> dict:
    """Run a worker to completion and return its result (an ``error`` key on failure)."""
    worker = Worker(target, kwargs, name)
    try:
        return worker.result(timeout)
    except WorkerError as exc:
        return {"error": str(exc).splitlines()[0], "detail": str(exc)}


def kill_all() -> None:
    """Kill every worker still running."""
    with _live_lock:
        workers = list(_live)
    for worker in workers:
        worker.kill(grace=1.0)


atexit.register(kill_all)
