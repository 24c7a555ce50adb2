"""oslo.messaging's RPC API on ``ntrabbit://`` against the same code on ``rabbit://``.

The workers of :mod:`bench.rabbit_rpc` (``serve`` and ``client``: sequential
call latency, 8-thread call rate, confirmed cast rate) with implementation
``ntrabbit`` or ``oslo``: the same oslo.messaging service code, only the URL
scheme differs. With ``eventlet=True`` the worker process is monkey-patched
before the measure imports anything of oslo.messaging, as OpenStack services
are (its "threads" are then green threads).
"""
from __future__ import annotations

from typing import Any

#: the implementations this measure compares (``ntrabbit`` in the "ours" column)
IMPLS = ("ntrabbit", "oslo")


def _patch(eventlet: bool) -> None:
    if eventlet:
        import eventlet as _eventlet

        _eventlet.monkey_patch()


def serve(eventlet: bool = False, **kwargs: Any) -> dict:
    _patch(eventlet)
    from bench import rabbit_rpc

    return rabbit_rpc.serve(**kwargs)


def client(eventlet: bool = False, **kwargs: Any) -> dict:
    _patch(eventlet)
    from bench import rabbit_rpc

    return rabbit_rpc.client(**kwargs)
