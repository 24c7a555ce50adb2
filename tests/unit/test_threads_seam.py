"""The Kafka driver makes its threads, locks, events, queues and sleeps only through
``notify_transport.drivers.threads`` (native under eventlet, asked at call time).

A module that imported ``threading`` itself would make green primitives in a monkey-patched
service, shared with the driver's native threads: a hang that no broker-less test would see.
"""
from __future__ import annotations

import ast
import queue
import threading
from pathlib import Path

import pytest

from notify_transport.drivers import threads

PACKAGE = Path(__file__).resolve().parents[2] / "notify_transport"
#: Modules whose primitives the Kafka driver's native threads use: the driver, what it shares, and the
#: group-less readers (their fetch threads are native too).
NATIVE = sorted([*(PACKAGE / "drivers" / "kafka").rglob("*.py"), *(PACKAGE / "reading").rglob("*.py"),
                 PACKAGE / "drivers" / "reporting.py", PACKAGE / "drivers" / "counter.py"])
#: Standard modules whose primitives eventlet greens.
GREENED = {"threading", "queue", "_thread"}


def _type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _annotations(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.AnnAssign, ast.arg)):
        return [node.annotation] if node.annotation is not None else []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [node.returns] if node.returns is not None else []
    return []


def _runtime_nodes(tree: ast.Module):
    """Every node that runs: not in ``if TYPE_CHECKING:`` blocks nor in annotations, which only
    name types (the modules are ``from __future__ import annotations``)."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            todo.extend(node.orelse)
            continue
        yield node
        skip = [id(a) for a in _annotations(node)]
        todo.extend(child for child in ast.iter_child_nodes(node) if id(child) not in skip)


def primitives_made_outside_the_seam(source: str) -> list[str]:
    """What in ``source`` makes a thread primitive or sleeps without ``drivers/threads.py``."""
    found = []
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in GREENED]
        elif isinstance(node, ast.ImportFrom) and node.module in GREENED | {"time"}:
            names = [a.name for a in node.names if node.module != "time" or a.name == "sleep"]
            if names:
                found.append(f"{node.lineno}: from {node.module} import {', '.join(names)}")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "time" and node.attr == "sleep"):
            found.append(f"{node.lineno}: time.sleep")  # (an import of the others is found above)
    return found


@pytest.mark.parametrize("path", NATIVE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_kafka_driver_makes_primitives_only_through_the_seam(path: Path) -> None:
    assert primitives_made_outside_the_seam(path.read_text()) == []


@pytest.mark.parametrize("source", [
    "import threading\nlock = threading.Lock()\n",
    "from threading import Lock\n",
    "import queue as q\n",
    "import time\ntime.sleep(1)\n",
    "from time import sleep\n",
    "def f():\n    import _thread\n",
    "if TYPE_CHECKING:\n    pass\nelse:\n    import threading\n",
])
def test_the_check_finds_a_primitive_made_behind_the_seam(source: str) -> None:
    assert primitives_made_outside_the_seam(source) != []


@pytest.mark.parametrize("source", [
    "if TYPE_CHECKING:\n    import threading\nx: threading.Lock | None = None\n",
    "def f(stop: threading.Event) -> threading.Thread:\n    pass\n",
    "from notify_transport.drivers import threads\nlock = threads.Lock()\n",
    "import time\nnow = time.monotonic()\n",
])
def test_the_check_lets_types_and_the_seam_through(source: str) -> None:
    assert primitives_made_outside_the_seam(source) == []


def test_without_eventlet_the_seam_hands_out_the_standard_primitives() -> None:
    assert threads.patched() is False
    assert isinstance(threads.Event(), threading.Event)
    assert isinstance(threads.Thread(target=print), threading.Thread)
    assert isinstance(threads.Queue(1), queue.Queue)
    assert threads.queue_full() is queue.Full and threads.queue_empty() is queue.Empty
    assert threads.current_thread() is threading.current_thread()
    with pytest.raises(ValueError, match="not one of"):
        threads.native("socket")


#: A child whose first import of ``queue`` is held open until a second thread asks for a queue too.
_FIRST_IMPORT_RACE = r'''
import importlib.abc, importlib.machinery, sys, threading
sys.modules.pop("queue", None)  # the child imports it afresh, through the slowed loader below
started, release = threading.Event(), threading.Event()

class SlowQueue(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "queue":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        real = spec.loader

        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return real.create_module(spec)

            def exec_module(self, module):
                started.set()
                release.wait(10)
                real.exec_module(module)

        spec.loader = Loader()
        return spec

sys.meta_path.insert(0, SlowQueue())
from notify_transport.drivers import threads
errors = []

def make():
    try:
        threads.SimpleQueue().put(1)
    except Exception as exc:
        errors.append(repr(exc))

first = threading.Thread(target=make)
first.start()
assert started.wait(10)
second = threading.Thread(target=make)
second.start()
second.join(0.5)  # asks while the first import is half done; it must wait, not fail
release.set()
first.join(10)
second.join(10)
print(errors or "ok")
'''


def test_a_queue_asked_for_during_the_first_import_of_queue_waits_for_it():
    # Regression (a listener pool got nothing in the hybrid service test): two listener threads
    # asked for their first queue at once; the second took the half-imported module from
    # sys.modules and failed with AttributeError, and its poll lost the records it had taken.
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FIRST_IMPORT_RACE], capture_output=True, text=True,
                         timeout=60, cwd=PACKAGE.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok", out.stdout
