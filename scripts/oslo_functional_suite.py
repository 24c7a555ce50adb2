#!/usr/bin/env python3
"""Run oslo.messaging's own functional suite (RPC and notifications) through notify-transport.

    python scripts/oslo_functional_suite.py \\
        --rpc-url ntrabbit://guest:guest@127.0.0.1:5672/ \\
        --notify-url ntkafka://127.0.0.1:9092/ [--workdir DIR] [-- PYTEST ARGS]

Downloads the sdist of the installed oslo.messaging (``pip download --no-deps
--no-binary :all: oslo.messaging==<version>``), unpacks it, and makes the one
kind of change the suite needs: its branches for a scheme are taken by our
alias of that scheme too, ``ntrabbit://`` taking the ``rabbit://`` ones (call
monitoring, the mandatory flag) and ``ntkafka://`` the ``kafka://`` ones
(Kafka's longer waits, a consumer group per test, and the skip of
``test_multiple_servers``: two members of one consumer group cannot be
relied on to share eight keyless messages, the reason oslo skips it for
Kafka). Everything else runs as shipped, eventlet-monkey-patched by
``oslo_messaging/tests/__init__.py``, under unittest as oslo's stestr runs it
(the load_tests protocol gives test_logger its scenarios):
``python -m unittest -v`` over ``oslo_messaging.tests.functional.test_functional``
and ``...functional.notify.test_logger`` in the unpacked tree, with
``RPC_TRANSPORT_URL`` and ``NOTIFY_TRANSPORT_URL`` set and this Python's
``bin`` first on ``PATH`` (the metrics test starts ``python3 -m oslo_metrics``,
as it would in oslo's tox environment). The exit status is unittest's.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

#: The suite's modules (oslo's functional RPC and notification tests).
SUITE = ("oslo_messaging.tests.functional.test_functional",
         "oslo_messaging.tests.functional.notify.test_logger")
#: The one kind of change made to oslo's tests: our alias takes its scheme's branches.
BRANCHES = {'url.startswith("rabbit://")': 'url.startswith(("rabbit://", "ntrabbit://"))',
            'url.startswith("kafka://")': 'url.startswith(("kafka://", "ntkafka://"))'}
#: Where the suite tests a URL's scheme.
BRANCH_FILES = ("oslo_messaging/tests/functional/test_functional.py",
                "oslo_messaging/tests/functional/notify/test_logger.py")


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


def let_aliases_take_their_schemes_branches(tree: Path) -> int:
    """Apply the change; return how many branches our aliases take (idempotent)."""
    taken = 0
    for name in BRANCH_FILES:
        path = tree / name
        text = original = path.read_text()
        for theirs, ours in BRANCHES.items():
            text = text.replace(theirs, ours)
            taken += text.count(ours)
        if text != original:  # written once: runs side by side never see a file half written
            path.write_text(text)
    return taken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rpc-url", required=True, help="RPC_TRANSPORT_URL, e.g. ntrabbit://...")
    parser.add_argument("--notify-url", required=True, help="NOTIFY_TRANSPORT_URL, e.g. ntkafka://...")
    parser.add_argument("--workdir", type=Path, default=Path("build/oslo-sdist"),
                        help="where the sdist is downloaded and unpacked (default: %(default)s)")
    parser.add_argument("--prepare-only", action="store_true",
                        help="download, unpack and change the suite, then exit (so that several "
                             "runs can then share the tree)")
    parser.add_argument("test_names", nargs="*",
                        help="run only these (unittest names, e.g. oslo_messaging.tests.functional."
                             "test_functional.CallTestCase); default: the whole suite")
    args = parser.parse_args(argv)
    tree = unpacked_sdist(args.workdir.resolve(), metadata.version("oslo.messaging"))
    if not let_aliases_take_their_schemes_branches(tree):
        parser.error(f"no rabbit:// or kafka:// branch found in {tree}: oslo's suite changed")
    if args.prepare_only:
        return 0
    env = dict(os.environ, RPC_TRANSPORT_URL=args.rpc_url, NOTIFY_TRANSPORT_URL=args.notify_url,
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    command = [sys.executable, "-W", "ignore::DeprecationWarning", "-m", "unittest", "-v",
               *(args.test_names or SUITE)]
    return subprocess.run(command, cwd=tree, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
