"""Operator commands on a running notification bus: send, tail, lag, replay, topics.

Thin over the public API (``send``) and the Kafka driver's configuration and
naming (the others); each command is a module with ``add_parser(subparsers)``
and ``run(args) -> exit status``.
"""
from __future__ import annotations

from typing import Any

from notify_transport.cli.ops import lag, replay, send, tail, topics

COMMANDS = (send, tail, lag, replay, topics)


def add_parser(sub: Any) -> None:
    """Register every operator command on the ``notify-transport`` parser."""
    for command in COMMANDS:
        command.add_parser(sub)
