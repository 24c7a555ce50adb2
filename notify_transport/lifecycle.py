"""``with`` support shared by the servers: start on entry, stop and wait on exit.

Kept apart from :mod:`notify_transport.server` (which imports both server
kinds) so that each server can inherit it without an import cycle.
"""
from __future__ import annotations

from types import TracebackType
from typing import TypeVar

_Server = TypeVar("_Server", bound="ServerContext")


class ServerContext:
    """Mixin: ``with server:`` starts it, and on leaving stops it and waits.

    The exit runs ``stop()`` then ``wait()`` (oslo.messaging's shutdown
    sequence), so messages already received are still dispatched and the
    connection is released before the block's caller goes on, also when the
    block raised.
    """

    def start(self) -> None:  # pragma: no cover - provided by the server
        raise NotImplementedError

    def stop(self) -> object:  # pragma: no cover - provided by the server
        raise NotImplementedError

    def wait(self) -> object:  # pragma: no cover - provided by the server
        raise NotImplementedError

    def __enter__(self: _Server) -> _Server:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.stop()
        finally:
            self.wait()
