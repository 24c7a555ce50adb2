"""A driver package's face: the names the layers above may import, each loaded on first use.

A driver package's ``__init__`` imports its public names under
``TYPE_CHECKING`` (what type checkers read) and takes ``__all__`` and
``__getattr__`` from :func:`lazy_names`, which reads those imports: importing
the package loads nothing, and ``from package import Name`` loads Name's module
only. The names are listed once, in the imports.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any, Callable


def declared_names(init_file: str) -> dict[str, str]:
    """``{name: module}`` of the ``from ... import`` lines under ``if TYPE_CHECKING:`` in
    ``init_file``."""
    homes: dict[str, str] = {}
    for node in ast.parse(Path(init_file).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    homes.update({alias.name: statement.module for alias in statement.names})
    return homes


def lazy_names(package: str, init_file: str) -> tuple[list[str], Callable[[str], Any]]:
    """``__all__`` and a module ``__getattr__`` for ``package``: each name declared in
    ``init_file`` is imported from its module on first use, then kept in the package."""
    homes = declared_names(init_file)

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return sorted(homes), __getattr__
