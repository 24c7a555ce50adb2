"""What the package's layers may do, read from its syntax trees (no import needed)."""
from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "notify_transport"


def _calls(path: pathlib.Path, module: str, function: str) -> list[int]:
    """Lines of ``path`` that call ``module.function`` (``import module`` style)."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == function and isinstance(node.func.value, ast.Name)
            and node.func.value.id == module]


def test_only_the_command_line_installs_signal_handlers():
    """A process's signal handlers are its main program's: a library module that installs one
    takes SIGTERM away from the service that imported it (only ``cli/`` and ``testing/``,
    which run their own processes, may)."""
    offenders = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
                 if not path.relative_to(PACKAGE).parts[0] in ("cli", "testing")
                 for line in _calls(path, "signal", "signal")]
    assert offenders == []


def test_the_check_sees_a_handler(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import signal\nsignal.signal(signal.SIGTERM, print)\n")
    assert _calls(module, "signal", "signal") == [2]


#: Modules every layer may import: they import nothing of the package but each other
#: (doc/source/contributor.rst, "Architecture").
SHARED = {"notify_transport.exceptions", "notify_transport.target", "notify_transport.url",
          "notify_transport.backoff", "notify_transport.secrets", "notify_transport.times"}


def _imports(path: pathlib.Path) -> set[str]:
    """The package modules ``path`` imports (``from notify_transport import x`` counts as ``x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("notify_transport"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "notify_transport":
                found.update(f"notify_transport.{a.name}" for a in node.names)
            elif node.module.startswith("notify_transport."):
                found.add(node.module)
    return found


def test_drivers_import_only_drivers_and_the_shared_modules():
    """Nothing below imports what is above: the drivers use the driver interface, each other's
    shared parts and the shared modules, never the API layer, the CLI or the pipeline."""
    offenders = sorted(f"{path.relative_to(PACKAGE)}: {name}"
                       for path in (PACKAGE / "drivers").rglob("*.py") for name in _imports(path)
                       if not name.startswith("notify_transport.drivers") and name not in SHARED)
    assert offenders == []


def test_the_shared_modules_import_only_each_other():
    offenders = sorted(f"{name}: {imported}" for name in SHARED
                       for imported in _imports(PACKAGE / f"{name.rpartition('.')[2]}.py")
                       if imported not in SHARED)
    assert offenders == []
