#!/usr/bin/env python3
"""Run oslo.messaging's own functional suite (RPC and notifications) through notify-transport.

    python scripts/oslo_functional_suite.py \\
        --rpc-url ntrabbit://guest:guest@127.0.0.1:5672/ \\
        --notify-url ntkafka://127.0.0.1:9092/ [--workdir DIR] [-- PYTEST ARGS]

Downloads the sdist of the installed oslo.messaging (``pip download --no-deps
--no-binary :all: oslo.messaging==<version>``), unpacks it, and makes the one
change the suite needs: its branches for ``rabbit://`` (call monitoring, the
mandatory flag) are taken by ``ntrabbit://`` too. Everything else is run as
shipped, eventlet-monkey-patched by ``oslo_messaging/tests/__init__.py``:
``pytest oslo_messaging/tests/functional/test_functional.py
oslo_messaging/tests/functional/notify`` in the unpacked tree, with
``RPC_TRANSPORT_URL`` and ``NOTIFY_TRANSPORT_URL`` set and this Python's
``bin`` first on ``PATH`` (the metrics test starts ``python3 -m oslo_metrics``,
as it would in oslo's tox environment). The exit status is pytest's.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

#: The suite's files, relative to the unpacked sdist.
SUITE = ("oslo_messaging/tests/functional/test_functional.py", "oslo_messaging/tests/functional/notify")
#: The only change made to oslo's tests: ``ntrabbit://`` takes the ``rabbit://`` branches.
RABBIT_BRANCH = 'self.rpc_url.startswith("rabbit://")'
RABBIT_OR_NTRABBIT = 'self.rpc_url.startswith(("rabbit://", "ntrabbit://"))'


def unpacked_sdist(workdir: Path, version: str) -> Path:
    """The unpacked sdist of oslo.messaging ``version`` in ``workdir`` (downloaded once)."""
    tree = workdir / f"oslo_messaging-{version}"
    if tree.is_dir():
        return tree
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    f"oslo.messaging=={version}", "-d", str(workdir)], check=True)
    archive = next(workdir.glob(f"oslo*messaging-{version}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(workdir, filter="data")
    return tree


def let_ntrabbit_take_rabbit_branches(tree: Path) -> int:
    """Apply the one change; return how many branches it touched (idempotent)."""
    path = tree / "oslo_messaging/tests/functional/test_functional.py"
    text = path.read_text()
    count = text.count(RABBIT_BRANCH)
    if count:
        path.write_text(text.replace(RABBIT_BRANCH, RABBIT_OR_NTRABBIT))
    return count or text.count(RABBIT_OR_NTRABBIT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rpc-url", required=True, help="RPC_TRANSPORT_URL, e.g. ntrabbit://...")
    parser.add_argument("--notify-url", required=True, help="NOTIFY_TRANSPORT_URL, e.g. ntkafka://...")
    parser.add_argument("--workdir", type=Path, default=Path("build/oslo-sdist"),
                        help="where the sdist is downloaded and unpacked (default: %(default)s)")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    tree = unpacked_sdist(args.workdir.resolve(), metadata.version("oslo.messaging"))
    if not let_ntrabbit_take_rabbit_branches(tree):
        parser.error(f"no rabbit:// branch found in {tree}: oslo's suite changed")
    env = dict(os.environ, RPC_TRANSPORT_URL=args.rpc_url, NOTIFY_TRANSPORT_URL=args.notify_url,
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *SUITE, *args.pytest_args]
    return subprocess.run(command, cwd=tree, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
