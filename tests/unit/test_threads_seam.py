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
#: Modules whose primitives the Kafka driver's native threads use: the driver and what it shares.
NATIVE = sorted([*(PACKAGE / "drivers" / "kafka").rglob("*.py"), PACKAGE / "drivers" / "reporting.py"])
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
