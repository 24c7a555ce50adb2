"""Run one benchmark function in its own process: ``python -m bench.worker MOD:FUNC JSON``.

Each implementation runs in a fresh interpreter so that nothing one library
leaves behind (threads, global config, imported C state) slows another.
The function gets the JSON object as keyword arguments and a ``signal``
callable to report progress lines (``@@SIGNAL@@ name``); its return value is
printed as ``@@RESULT@@ <json>``. Lines on stdin are commands for the
function (``wait_command``).
"""
from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import traceback
from typing import Any

RESULT_PREFIX = "@@RESULT@@ "
SIGNAL_PREFIX = "@@SIGNAL@@ "


def signal(name: str) -> None:
    """Tell the orchestrator something happened (e.g. ``ready``)."""
    sys.stdout.write(f"{SIGNAL_PREFIX}{name}\n")
    sys.stdout.flush()


def wait_command(expected: str | None = None) -> str:
    """Block until the orchestrator writes a line on stdin; return it."""
    while True:
        line = sys.stdin.readline()
        if not line:
            raise SystemExit("orchestrator went away")
        line = line.strip()
        if expected is None or line == expected:
            return line


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m bench.worker MODULE:FUNCTION JSON_KWARGS", file=sys.stderr)
        return 2
    logging.basicConfig(level=os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    module_name, func_name = argv[1].split(":", 1)
    kwargs: dict[str, Any] = json.loads(argv[2])
    func = getattr(importlib.import_module(module_name), func_name)
    try:
        result = func(**kwargs)
    except Exception as exc:  # reported to the orchestrator, which records it
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(RESULT_PREFIX + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    # keep our own package importable when run from anywhere
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main(sys.argv))
