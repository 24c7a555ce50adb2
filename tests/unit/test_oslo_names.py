"""Every public name of the installed oslo.messaging exists in notify_transport.

The names are read from oslo.messaging itself, so a new release shows what is
missing. A name may be absent only when doc/source/migration.rst lists it,
with the reason, under "Deliberately absent"; that list is the only one.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

MIGRATION = Path(__file__).resolve().parents[2] / "doc" / "source" / "migration.rst"
#: the submodules services import, compared name by name (plus the package itself, "")
MODULES = ["", "notify", "rpc", "serializer", "target", "transport", "conffixture", "exceptions",
           "server", "dispatcher"]
#: packages whose public submodules must exist too
PACKAGES = ["", "notify", "rpc"]


def documented_absences() -> dict[str, str]:
    """``{qualified name: reason}`` from the "Deliberately absent" list of the migration guide."""
    text = MIGRATION.read_text(encoding="utf-8")
    section = text.split("Deliberately absent", 1)[1]
    section = re.split(r"\n\S[^\n]*\n[=~^-]{3,}\n", section, maxsplit=1)[0]
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\* ``([\w.]+)``[:\s]+(.+)$", section, re.M)}


def oslo_module(name: str):
    return importlib.import_module("oslo_messaging" + (f".{name}" if name else ""))


def public_names(module) -> set[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return set(names)
    out = set()
    for name in dir(module):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        home = obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", "") or ""
        if home.startswith("oslo_messaging"):
            out.add(name)
    return out


def expected_names() -> list[str]:
    names = set()
    for mod in MODULES:
        prefix = f"{mod}." if mod else ""
        names |= {prefix + n for n in public_names(oslo_module(mod))}
    for pkg in PACKAGES:
        prefix = f"{pkg}." if pkg else ""
        names |= {prefix + m.name for m in pkgutil.iter_modules(oslo_module(pkg).__path__)
                  if not m.name.startswith("_")}
    return sorted(names)


def ours(qualified: str):
    """The object ``notify_transport.<qualified>`` (importing submodules), or None."""
    module, obj = importlib.import_module("notify_transport"), None
    parts = qualified.split(".")
    for i, part in enumerate(parts):
        obj = getattr(module, part, None)
        if obj is None:
            try:
                obj = importlib.import_module(f"{module.__name__}.{part}")
            except ImportError:
                return None
        if i < len(parts) - 1:
            if not inspect.ismodule(obj):
                return None
            module = obj
    return obj


def theirs(qualified: str):
    mod, _, name = qualified.rpartition(".")
    module = oslo_module(mod)
    return getattr(module, name, None) or importlib.import_module(f"{module.__name__}.{name}")


def test_every_absence_is_documented_with_a_reason():
    absent = documented_absences()
    assert absent, "the migration guide lost its Deliberately absent list"
    assert all(len(reason) > 15 for reason in absent.values()), absent


@pytest.mark.parametrize("qualified", expected_names())
def test_oslo_name_exists_or_is_documented_absent(qualified):
    absent = documented_absences()
    if qualified in absent:
        assert ours(qualified) is None, f"{qualified} exists now: drop it from the absent list"
        return
    assert ours(qualified) is not None, (
        f"notify_transport.{qualified} is missing: add it, or list it with the reason under "
        f"'Deliberately absent' in doc/source/migration.rst")


def test_no_stale_absences():
    assert set(documented_absences()) <= set(expected_names())


def _classes(module) -> dict[str, type]:
    return {n: getattr(module, n) for n in public_names(module) if inspect.isclass(getattr(module, n, None))}


@pytest.mark.parametrize("mod", MODULES)
def test_class_hierarchy_matches(mod):
    """Where oslo's class A derives from B, ours does too: ``except B`` catches the same errors."""
    absent = documented_absences()
    prefix = f"{mod}." if mod else ""
    classes = {n: c for n, c in _classes(oslo_module(mod)).items() if prefix + n not in absent}
    for a, ca in classes.items():
        for b, cb in classes.items():
            if a != b and issubclass(ca, cb):
                assert issubclass(ours(prefix + a), ours(prefix + b)), f"{prefix}{a} should derive from {b}"


def _parameters(obj) -> list[str]:
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and p.name not in ("self", "cls") and not p.name.startswith("_")]


@pytest.mark.parametrize("qualified", [n for n in expected_names() if "." not in n])
def test_positional_parameters_match(qualified):
    """Calls written for oslo.messaging pass the same arguments in the same places."""
    if qualified in documented_absences():
        return
    mine, their = ours(qualified), theirs(qualified)
    if not callable(their) or inspect.ismodule(their):
        return
    expected = _parameters(their)
    got = _parameters(mine)
    assert got[:len(expected)] == expected, f"{qualified}: oslo takes {expected}, ours {got}"
