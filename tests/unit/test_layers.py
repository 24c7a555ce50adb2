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
                 if path.relative_to(PACKAGE).parts[0] not in ("cli", "testing")
                 for line in _calls(path, "signal", "signal")]
    assert offenders == []


def test_the_check_sees_a_handler(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import signal\nsignal.signal(signal.SIGTERM, print)\n")
    assert _calls(module, "signal", "signal") == [2]


#: A consumer's own ways of listing offsets: the package lists them only through the admin
#: client, in drivers/kafka/cluster.py (ClusterAdmin.list_offsets and offsets_at).
CONSUMER_OFFSET_LISTINGS = ("offsets_for_times", "get_watermark_offsets")


def _method_calls(path: pathlib.Path, names: tuple[str, ...]) -> list[int]:
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names]


def test_offsets_are_listed_in_one_place():
    offenders = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
                 for line in _method_calls(path, CONSUMER_OFFSET_LISTINGS)]
    assert offenders == []


def test_the_check_sees_a_consumer_listing_offsets(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("low, high = consumer.get_watermark_offsets(tp, cached=False)\n")
    assert _method_calls(module, CONSUMER_OFFSET_LISTINGS) == [1]


#: Requests that list every pool or move a pool's offsets: operator tools (reading/pools.py),
#: never made by the driver, so that a service's transport cannot rewrite a pool's positions.
POOL_TOOL_REQUESTS = ("list_consumer_groups", "alter_consumer_group_offsets")


def test_the_driver_neither_lists_pools_nor_moves_their_offsets():
    offenders = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted((PACKAGE / "drivers").rglob("*.py"))
                 for line in _method_calls(path, POOL_TOOL_REQUESTS)]
    assert offenders == []
    assert _method_calls(PACKAGE / "reading" / "pools.py", POOL_TOOL_REQUESTS)  # where they are made


#: Modules every layer may import: they import nothing of the package but each other
#: (doc/source/contributor.rst, "Architecture").
SHARED = {"notify_transport.exceptions", "notify_transport.target", "notify_transport.url",
          "notify_transport.backoff", "notify_transport.secrets", "notify_transport.times",
          "notify_transport.precedence"}


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


#: The driver packages: above ``drivers/`` only their face (the package itself) is imported.
DRIVER_PACKAGES = ("notify_transport.drivers.kafka", "notify_transport.drivers.rabbit")


def _private_imports(path: pathlib.Path) -> list[str]:
    """The modules inside a driver package that ``path`` imports (``from package import
    module`` counts too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            folder = PACKAGE.parent / node.module.replace(".", "/")
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                       if node.module in DRIVER_PACKAGES and (
                                           (folder / f"{a.name}.py").exists() or (folder / a.name).is_dir())]
        found += [m for m in modules if any(m.startswith(p + ".") for p in DRIVER_PACKAGES)]
    return found


def test_the_layers_above_the_drivers_use_only_a_driver_package_s_face():
    """The CLI, the pipeline, the API layer, the integrations and the launchers import a driver
    package (its ``__init__``), never a module inside it: the driver's inside may change."""
    offenders = sorted(f"{path.relative_to(PACKAGE)}: {name}" for path in PACKAGE.rglob("*.py")
                       if path.relative_to(PACKAGE).parts[0] != "drivers"
                       for name in _private_imports(path))
    assert offenders == []


def test_the_check_sees_a_private_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from notify_transport.drivers.kafka import client_properties\n"
                      "from notify_transport.drivers.kafka.cluster import ClusterAdmin\n"
                      "from notify_transport.drivers.kafka import ClusterAdmin\n")
    assert _private_imports(module) == ["notify_transport.drivers.kafka.client_properties",
                                        "notify_transport.drivers.kafka.cluster"]


def test_a_face_offers_what_it_declares():
    """Each name a face declares resolves, lazily, to the object of the module it names."""
    import importlib

    from notify_transport.drivers.face import declared_names

    for package in DRIVER_PACKAGES:
        face = importlib.import_module(package)
        homes = declared_names(face.__file__)
        assert homes and sorted(homes) == face.__all__
        for name, home in homes.items():
            assert getattr(face, name) is getattr(importlib.import_module(home), name)
