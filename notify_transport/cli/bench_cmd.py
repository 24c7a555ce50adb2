"""``notify-transport bench``: the benchmarks of ``bench/`` against oslo.messaging and the raw clients.

Runs the same code as ``python -m bench`` from a source checkout: it starts a
noida-db broker (or uses ``--kafka-bootstrap``), uses RabbitMQ on
127.0.0.1:5672 in a vhost of its own, measures notify-transport, oslo.messaging
18.3.1 and confluent-kafka/pika in turn, prints a table of ratios with
PASS/FAIL against the targets and writes the JSON results. ``--quick`` takes
about a minute, a full run about five. Needs the ``bench`` extra
(oslo.messaging) and the ``embedded`` one (noida-db).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from notify_transport.exceptions import ConfigurationError


def _checkout_root() -> str | None:
    """The source checkout holding ``bench/`` next to this package, if any."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.path.dirname(package_dir)
    return root if os.path.isfile(os.path.join(root, "bench", "run.py")) else None


def _bench_run() -> Any:
    """Import ``bench.run`` from the checkout; a clear error when it is not there."""
    root = _checkout_root()
    if root is None:
        raise ConfigurationError(
            "the benchmarks live in the bench/ folder of a notify-transport source checkout; "
            "install it from one (pip install -e .[bench,embedded]) to run them")
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        return importlib.import_module("bench.run")
    except ImportError as exc:
        raise ConfigurationError(f"cannot load the benchmarks ({exc}); "
                                 "install the extras: pip install -e .[bench,embedded]") from None


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="benchmark against oslo.messaging and the raw clients",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    try:
        _bench_run().build_parser(p)
    except ConfigurationError as exc:
        p.set_defaults(func=lambda _args, exc=exc: _unavailable(exc))
        return
    p.set_defaults(func=run)


def _unavailable(exc: ConfigurationError) -> int:
    raise exc


def run(args: argparse.Namespace) -> int:
    """Run the benchmarks with the parsed options; 0 once the table and JSON are written."""
    return int(_bench_run().main(args=args) or 0)
