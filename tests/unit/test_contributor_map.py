"""doc/source/contributor.rst's behaviour-to-module table points at modules and names that exist.

In the Module column, ``path`` literals (``notify_transport/x.py``, ``drivers/y.py``
relative to the package, ``rpc/`` for a package) name modules; the ``Name``
literals after a path, up to the next ``;``, must be attributes of that module.
"""
from __future__ import annotations

import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "doc" / "source" / "contributor.rst"
_LITERAL = re.compile(r"``([^`]+)``")


def table_rows(text: str) -> list[tuple[str, str]]:
    """(behaviour, module column) of each row of the table under "Where each behaviour lives"."""
    table = text.split("Where each behaviour lives", 1)[1].split("\n\n", 2)[2]
    rows: list[tuple[str, str]] = []
    for line in table.split("\n\n", 1)[0].splitlines():
        if line.startswith("   * - "):
            rows.append((line[7:], ""))
        elif line.startswith("     - "):
            rows[-1] = (rows[-1][0], line[7:])
        elif line.startswith("       ") and rows:
            behaviour, module = rows[-1]
            if module:
                rows[-1] = (behaviour, f"{module} {line.strip()}")
            else:
                rows[-1] = (f"{behaviour} {line.strip()}", module)
    return rows[1:]  # the header row


def module_name(path: str) -> str:
    """``drivers/kafka/reader.py`` or ``notify_transport/rpc/`` -> the dotted module name."""
    if not path.startswith("notify_transport/"):
        path = "notify_transport/" + path
    return path.removesuffix("/").removesuffix(".py").replace("/", ".")


def citations(column: str) -> list[tuple[str, list[str]]]:
    """(module path, names cited after it) for each ``;``-separated part of a Module cell."""
    cited: list[tuple[str, list[str]]] = []
    for part in column.split(";"):
        for literal in _LITERAL.findall(part):
            if "/" in literal or literal.endswith(".py"):
                cited.append((literal, []))
            else:
                assert cited, f"name {literal!r} before any module in {column!r}"
                cited[-1][1].append(literal)
    return cited


def check_row(column: str) -> list[str]:
    """What the row cites that does not exist."""
    missing = []
    for path, names in citations(column):
        try:
            module = importlib.import_module(module_name(path))
        except ImportError as exc:
            missing.append(f"{path}: {exc}")
            continue
        for name in names:
            target: object = module
            for attr in name.split("."):
                if not hasattr(target, attr):
                    missing.append(f"{path}: no {name}")
                    break
                target = getattr(target, attr)
    return missing


ROWS = table_rows(DOC.read_text(encoding="utf-8"))


def test_the_table_is_found():
    assert len(ROWS) >= 30
    assert all(module for _behaviour, module in ROWS)


@pytest.mark.parametrize("behaviour, column", ROWS, ids=[b[:40] for b, _ in ROWS])
def test_each_row_cites_what_exists(behaviour, column):
    assert citations(column), f"row {behaviour!r} cites no module"
    assert check_row(column) == []


@pytest.mark.parametrize("column, problem", [
    ("``notify_transport/nowhere.py``", "nowhere.py"),
    ("``drivers/kafka/producer.py``: ``SideProducer``", "no SideProducer"),
    ("``notify_transport/url.py``: ``TransportURL.no_such_method``", "no TransportURL.no_such_method"),
    ("``notify_transport/secrets.py``: ``is_secret``; ``notify/nothing/``", "notify/nothing/"),
])
def test_a_row_pointing_at_something_missing_fails(column, problem):
    missing = check_row(column)
    assert len(missing) == 1 and problem in missing[0]


def test_names_belong_to_the_module_they_follow():
    assert citations("``a.py``: ``X``, ``Y``; ``b/``: ``Z``") == [("a.py", ["X", "Y"]), ("b/", ["Z"])]
