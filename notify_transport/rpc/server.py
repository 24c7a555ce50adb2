"""The RPC server: ``start()``, ``stop()``, ``wait()`` as in oslo.messaging.

Worker threads poll the driver listener themselves (one hop from the I/O
thread), added when all are busy up to ``executor_thread_pool_size``.
"""
from __future__ import annotations

import logging
import sys
import time
from typing import Any, Iterable

from notify_transport.drivers.base import Listener
from notify_transport.exceptions import ExpectedException, InvalidTarget, MessageUndeliverable, NoSuchMethod
from notify_transport.rpc import options
from notify_transport.rpc.access import RPCAccessPolicyBase, expose
from notify_transport.rpc.dispatcher import RPCDispatcher
from notify_transport.serializer import Serializer
from notify_transport.server import POLL_INTERVAL, MessageHandlingServer
from notify_transport.target import Target
from notify_transport.transport import RPCTransport

LOG = logging.getLogger(__name__)

__all__ = ["RPCServer", "get_rpc_server", "expected_exceptions", "expose"]


class RPCServer(MessageHandlingServer):
    """Serves the endpoints of one target (topic and server name).

    The lifecycle (start, stop, wait, ``with``) is
    :class:`~notify_transport.MessageHandlingServer`'s.
    """

    def __init__(self, transport: Any, target: Target, dispatcher: RPCDispatcher,
                 executor: str | None = "threading") -> None:
        super().__init__(transport, dispatcher, executor)
        if not isinstance(transport, RPCTransport):
            LOG.warning("Using notification transport for RPC. Please use get_rpc_transport to "
                        "obtain an RPC transport instance.")
        if not (target.topic and target.server):
            raise InvalidTarget("A server's target must have topic and server names specified",
                                target)
        options.register_server_opts(transport.conf)
        self.conf = transport.conf
        self.target = target
        self._idle = 0
        self._max_workers = 1

    def __repr__(self) -> str:
        return f"<RPCServer {self.target.topic}.{self.target.server}>"

    def _configure(self, override_pool_size: int | None) -> None:
        self._max_workers = max(1, int(override_pool_size or self.conf.executor_thread_pool_size))

    def _listen_target(self) -> Any:
        return self.target

    def _listen(self) -> Listener:
        return self.transport._listen(self.target, 1, None)  # noqa: SLF001

    def _launch(self, listener: Listener) -> None:
        self._idle = 0
        self._add_worker(listener)

    def _add_worker(self, listener: Listener) -> None:
        """One more worker thread; called holding the lock."""
        self._idle += 1
        self._spawn(self._work, f"rpc-{self.target.topic}-{len(self._workers)}", listener)

    def _work(self, listener: Listener) -> None:
        failures = 0
        while not self._aborting:
            try:
                incoming = listener.poll(timeout=POLL_INTERVAL, max_messages=1)
                failures = 0
            except Exception:
                failures += 1
                if self._poll_failed(failures):
                    break
                continue
            if not incoming:
                if self._stopping.is_set():
                    break  # stopped and drained
                continue
            if self._aborting:
                break  # abrupt stop: not handled, not answered (the caller times out)
            with self._lock:
                self._idle -= 1
                if self._idle == 0 and len(self._workers) < self._max_workers and not self._stopping.is_set():
                    self._add_worker(listener)
            try:
                for message in incoming:
                    self._process(message)
            finally:
                with self._lock:
                    self._idle += 1
        with self._lock:
            self._idle -= 1

    def _process(self, message: Any) -> None:
        method = message.message.get("method")
        started = time.monotonic()
        failure = None
        result = None
        try:
            result = self.dispatcher.dispatch(message)
        except ExpectedException as exc:
            failure = exc.exc_info
            LOG.debug("Expected exception during message handling (%s)", exc)
        except NoSuchMethod as exc:
            failure = sys.exc_info()
            if exc.method.endswith("_ignore_errors"):
                LOG.debug("Method %s not found", exc.method)
            else:
                LOG.exception("Exception during message handling")
        except Exception:
            failure = sys.exc_info()
            LOG.exception("Exception during message handling")
        try:
            if failure is None:
                message.reply(result)
            else:
                message.reply(failure=failure)
            LOG.debug("Replied to %s (msg_id %s) after %.3fs", method,
                      getattr(message, "msg_id", None), time.monotonic() - started)
        except MessageUndeliverable as exc:
            LOG.exception("MessageUndeliverable error, source exception: %s, routing_key: %s, "
                          "exchange: %s: ", exc.exception, exc.routing_key, exc.exchange)
        except Exception:
            LOG.exception("Can not send reply for message")
        finally:
            del failure


def get_rpc_server(transport: Any, target: Target, endpoints: Iterable[Any],
                   executor: str | None = "threading", serializer: Serializer | None = None,
                   access_policy: type[RPCAccessPolicyBase] | None = None,
                   server_cls: type[RPCServer] = RPCServer) -> RPCServer:
    """An RPC server for ``target`` (topic and server) dispatching to ``endpoints``.

    ``access_policy`` is a class: :class:`DefaultRPCAccessPolicy` (public
    methods, the default) or :class:`ExplicitRPCAccessPolicy` (only methods
    decorated with :func:`expose`).
    """
    options.register_server_opts(transport.conf)
    dispatcher = RPCDispatcher(endpoints, serializer, access_policy,
                               ping_enabled=transport.conf.rpc_ping_enabled)
    return server_cls(transport, target, dispatcher, executor)


def expected_exceptions(*exceptions: type[BaseException]) -> Any:
    """Decorator for endpoint methods: the listed exceptions reach the client
    as themselves but are not logged as server errors."""

    def outer(func: Any) -> Any:
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except exceptions:
                raise ExpectedException() from None

        inner.__name__ = getattr(func, "__name__", "inner")
        inner.__doc__ = getattr(func, "__doc__", None)
        if getattr(func, "exposed", False):
            inner.exposed = True  # type: ignore[attr-defined]
        return inner

    return outer
