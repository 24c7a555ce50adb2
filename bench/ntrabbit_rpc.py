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

    if not eventlet:
        return rabbit_rpc.serve(**kwargs)
    # under eventlet, reading the orchestrator's "stop" from stdin would block the
    # hub (stdin is not green): wait for it in a native thread of tpool instead
    from eventlet import tpool

    from bench.rabbit_impls import make_rpc_server
    from bench.worker import signal, wait_command

    rpc_server = make_rpc_server(kwargs["impl"], kwargs["url"], kwargs["rabbit"], kwargs["topic"],
                                 kwargs["server"])
    rpc_server.start()
    try:
        signal("ready")
        tpool.execute(wait_command, "stop")
    finally:
        rpc_server.stop()
    return {"stopped": True}


def client(eventlet: bool = False, **kwargs: Any) -> dict:
    _patch(eventlet)
    from bench import rabbit_rpc

    return rabbit_rpc.client(**kwargs)
