"""No private name of another library (pika, confluent-kafka, oslo.*, the standard library)
anywhere in the package: such names change without notice, and an upgrade then turns
into a silent slowdown or a protocol bug.

Three checks over the package's syntax trees:

* no ``from X import _name`` and no ``import``/``from`` of a private module of another
  library;
* no ``._name`` attribute access on a name imported from another library
  (``pika._x``, ``Channel._x``, ``threading.RLock._x``...);
* no ``._name`` attribute access at all unless the package itself defines ``_name``
  (as a method, class attribute, ``self._name = ...`` or ``__slots__`` entry), which
  catches private names reached through objects (``self._lock._is_owned()``).
"""
from __future__ import annotations

import ast
import pathlib
import re
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "notify_transport"
FOREIGN_ROOTS = {"pika", "confluent_kafka", "kombu", "amqp", "oslo_config", "oslo_messaging",
                 "oslo_serialization", "oslo_utils", "oslo_context", "oslo_log", "oslo_service",
                 "stevedore", "pyspark"} | set(sys.stdlib_module_names)
#: Underscore names that are public API (namedtuple methods, os._exit).
PUBLIC_UNDERSCORE = {"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_exit"}
#: confluent-kafka documents librdkafka's local error codes as ``KafkaError._NAME``.
KAFKA_ERROR_CODE = re.compile(r"_[A-Z][A-Z0-9_]*")
#: Known uses outside the RabbitMQ driver, each with why it stays for now:
#: (path prefix, name) -> reason. Prefixes, not files, so that moving a module keeps its entry.
ALLOWED = {
    ("notify_transport/integrations/", "oslo_messaging._drivers"):
        "an oslo.messaging driver plugin must subclass oslo_messaging._drivers.base.BaseDriver",
    ("notify_transport/integrations/", "_url"):
        "the transport URL that oslo's BaseDriver keeps for its subclasses",
    ("notify_transport/pipeline/", "_jvm"): "PySpark reaches JVM classes only this way",
    ("notify_transport/pipeline/", "_jsc"): "PySpark reaches the JVM context only this way",
}

#: Private names the old rabbit I/O shortcuts used: named here so that they cannot come back.
KNOWN_OFFENDERS = {"_is_owned", "_frame_buffer", "_read_frame", "_process_frame",
                   "_trim_frame_buffer", "_on_data_available", "_output_marshaled_frames",
                   "_adapter_emit_data", "_proto_data_received", "_tx_buffers",
                   "_tx_buffered_byte_count", "_initiate_abort", "_on_socket_readable",
                   "_raise_if_not_open", "_consumers_with_noack", "_body_max_length",
                   "_STATE_ACTIVE", "_register_fd", "_modify_fd_events", "_unregister_fd",
                   "_dispatch_fd_events", "_init_poller", "_get_poller", "_fd_handlers",
                   "_fd_events"}


def _allowed(where: str, name: str) -> bool:
    return any(where.startswith(prefix) and name == allowed for prefix, allowed in ALLOWED)


def _sources() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_foreign(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in FOREIGN_ROOTS  # type: ignore[union-attr]


def _defined_private_names(trees: dict[pathlib.Path, ast.Module]) -> set[str]:
    """Every underscore name the package defines itself."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[0])
            elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
                names.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)
    return {name for name in names if _is_private(name)}


def _foreign_names(tree: ast.Module) -> set[str]:
    """Local names bound to another library's modules or objects by imports."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_foreign(alias.name):
                    bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_foreign(node.module):
            bound.update(alias.asname or alias.name for alias in node.names)
    return bound


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def find_private_uses(trees: dict[pathlib.Path, ast.Module]) -> list[str]:
    """``file:line: what`` for every private name of another library, less :data:`ALLOWED`."""
    own = _defined_private_names(trees)
    found: list[tuple[str, str, str]] = []
    for path, tree in trees.items():
        found += _private_uses_in(str(path.relative_to(PACKAGE.parent)), tree, own)
    return [message for where, name, message in found if not _allowed(where, name)]


def _private_uses_in(where: str, tree: ast.Module, own: set[str]) -> list[tuple[str, str, str]]:
    problems: list[tuple[str, str, str]] = []
    foreign = _foreign_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_foreign(alias.name) and any(map(_is_private, alias.name.split("."))):
                    problems.append((where, alias.name,
                                     f"{where}:{node.lineno}: imports private module {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_foreign(node.module):
            if any(map(_is_private, node.module.split("."))):  # type: ignore[union-attr]
                problems.append((where, node.module, f"{where}:{node.lineno}: imports from "
                                                     f"private module {node.module}"))
            for alias in node.names:
                if _is_private(alias.name):
                    problems.append((where, alias.name,
                                     f"{where}:{node.lineno}: imports {node.module}.{alias.name}"))
        elif isinstance(node, ast.Attribute) and _is_private(node.attr):
            if node.attr in PUBLIC_UNDERSCORE or (
                    _root_name(node.value) == "KafkaError" and KAFKA_ERROR_CODE.fullmatch(node.attr)):
                continue
            if _root_name(node.value) in foreign:
                problems.append((where, node.attr,
                                 f"{where}:{node.lineno}: {ast.unparse(node)} (another library's)"))
            elif node.attr in KNOWN_OFFENDERS or node.attr not in own:
                problems.append((where, node.attr,
                                 f"{where}:{node.lineno}: {ast.unparse(node)} (not defined here)"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _is_private(node.args[1].value)):
            name = node.args[1].value
            if _root_name(node.args[0]) in foreign or name in KNOWN_OFFENDERS or name not in own:
                problems.append((where, name, f"{where}:{node.lineno}: {ast.unparse(node)} "
                                              "(a private name by string)"))
    return problems


def _parse(sources: dict[str, str]) -> dict[pathlib.Path, ast.Module]:
    return {PACKAGE / name: ast.parse(text) for name, text in sources.items()}


def test_the_package_uses_no_private_name_of_another_library():
    trees = {path: ast.parse(path.read_text(), str(path)) for path in _sources()}
    assert find_private_uses(trees) == []


def test_the_rabbit_driver_has_no_io_shortcuts_module():
    assert not (PACKAGE / "drivers" / "rabbit" / "amqp_io.py").exists()


@pytest.mark.parametrize("code", [
    "import threading\nthreading.RLock()._is_owned()\n",
    "import threading\nclass A:\n    def __init__(self):\n        self._lock = threading.RLock()\n"
    "    def f(self):\n        return self._lock._is_owned()\n",
    "import pika\npika.connection.Connection._read_frame\n",
    "from pika.channel import Channel\nChannel._raise_if_not_open\n",
    "from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport\n",
    "import concurrent.futures._base\n",
    "from concurrent.futures._base import Future\n",
    "def f(conn):\n    return conn._transport._sock\n",
    "from oslo_context import context\ngetattr(context, '_request_store', None)\n",
])
def test_the_scan_finds_private_names(code):
    assert find_private_uses(_parse({"sample.py": code}))


@pytest.mark.parametrize("code", [
    "class A:\n    __slots__ = ('_x',)\n    def __init__(self):\n        self._x = 1\n"
    "    def f(self, other):\n        return other._x\n",
    "import collections\nP = collections.namedtuple('P', 'a')\nP(1)._replace(a=2)\n",
    "from __future__ import annotations\nimport os\nos.path.join('a', 'b')\n",
])
def test_the_scan_accepts_own_and_public_names(code):
    assert find_private_uses(_parse({"sample.py": code})) == []
