"""README.md's Layout block names the package's real modules, and every package in it.

The block is a tree: two spaces of indent per level; a line starts with the
paths it is about (``x.py`` files or a ``dir/``), then, after two spaces or
more, what they hold. A ``name.py`` in that text is a module of the line's
directory (the directory the line names, or the one it stands in).
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "notify_transport"
_PY_WORD = re.compile(r"\b([a-z_][a-z0-9_]*\.py)\b")


def layout_block(readme: str) -> list[str]:
    """The lines of the code block under "## Layout"."""
    section = readme.split("\n## Layout\n", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


def parse(lines: list[str]) -> tuple[list[Path], list[Path]]:
    """(paths the lines start with, modules their texts mention), relative to the repository."""
    named: list[Path] = []
    mentioned: list[Path] = []
    parents: list[Path] = []   # the directory of each depth so far
    for line in lines:
        depth = (len(line) - len(line.lstrip(" "))) // 2
        head, _, text = line.strip().partition("  ")
        paths = head.split()
        assert paths and all(p.endswith((".py", "/")) for p in paths), f"not a layout line: {line!r}"
        assert depth <= len(parents), f"indented past its directory: {line!r}"
        del parents[depth:]
        here = parents[-1] if parents else Path()
        for path in paths:
            named.append(here / path.rstrip("/"))
        if len(paths) == 1 and paths[0].endswith("/"):
            here = here / paths[0].rstrip("/")
            parents.append(here)
        mentioned.extend(here / word for word in _PY_WORD.findall(text))
    return named, mentioned


def readme_layout() -> tuple[list[Path], list[Path]]:
    return parse(layout_block((ROOT / "README.md").read_text(encoding="utf-8")))


def test_the_layout_starts_at_the_package() -> None:
    assert readme_layout()[0][0] == Path(PACKAGE)


def test_every_path_in_the_layout_exists() -> None:
    named, mentioned = readme_layout()
    missing = [str(p) for p in named + mentioned if not (ROOT / p).exists()]
    assert not missing, f"README.md's Layout names what the tree does not have: {missing}"


def test_every_package_and_top_level_module_is_in_the_layout() -> None:
    package = ROOT / PACKAGE
    packages = {p.parent.relative_to(ROOT) for p in package.rglob("__init__.py")}
    top_level = {p.relative_to(ROOT) for p in package.glob("*.py")}
    left_out = sorted(str(p) for p in (packages | top_level) - set(readme_layout()[0]))
    assert not left_out, f"README.md's Layout leaves out: {left_out}"


def test_the_parser_refuses_a_line_of_prose() -> None:
    try:
        parse(["notify_transport/", "  drivers/   base.py", "               prose carried over"])
    except AssertionError as exc:
        assert "not a layout line" in str(exc)
    else:
        raise AssertionError("a line not starting with a path was taken")
