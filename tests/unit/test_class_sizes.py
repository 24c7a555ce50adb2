"""No class of the package grows past what one reader holds in mind.

The Kafka listener once did group joining, start positions, rebalances,
polling, the rewind, decoding, workers, hooks, metrics and closing in one
767-line class, and most races of a week landed there. It now composes parts
with one job each; these bounds keep it so.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "notify_transport"
#: The most lines any class may span.
CLASS_LIMIT = 400
#: The Kafka listener: the poll loop and the parts it composes, nothing more.
LISTENER_LIMIT = 300


def class_sizes() -> dict[str, int]:
    """``module:Class`` -> lines, for every class in the package (nested ones too)."""
    sizes = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                name = f"{path.relative_to(PACKAGE.parent)}:{node.name}"
                sizes[name] = node.end_lineno - node.lineno + 1  # type: ignore[operator]
    return sizes


def test_no_class_is_longer_than_the_limit():
    sizes = class_sizes()
    assert len(sizes) > 50  # the walk found the package
    too_long = {name: lines for name, lines in sizes.items() if lines > CLASS_LIMIT}
    assert not too_long, f"split these classes (limit {CLASS_LIMIT} lines): {too_long}"


def test_the_kafka_listener_only_composes_its_parts():
    lines = class_sizes()["notify_transport/drivers/kafka/listener.py:KafkaListener"]
    assert lines < LISTENER_LIMIT, lines


def test_no_two_classes_of_the_package_share_a_name():
    """One name, one class: a reader who meets ``NtKafkaDriver`` knows which one it is."""
    homes: dict[str, list[str]] = {}
    for name in class_sizes():
        module, _, cls = name.partition(":")
        homes.setdefault(cls, []).append(module)
    shared = {cls: modules for cls, modules in homes.items() if len(set(modules)) > 1}
    assert not shared, f"rename one of each: {shared}"
