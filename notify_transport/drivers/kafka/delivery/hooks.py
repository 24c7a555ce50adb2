"""Lifecycle callbacks of a Kafka listener (zkafka's "lifecycle functions").

Every callback is optional, runs in the thread where the event happens and
must be quick; an exception it raises is logged and never changes what
happens to a message.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable

from notify_transport.exceptions import ConfigurationError

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class DeadLetter:
    """What :attr:`ListenerHooks.on_dead_letter` and ``on_retry`` receive."""

    #: where the record came from first (before any retry)
    original_topic: str
    original_partition: int
    original_offset: int
    #: processing attempts made so far
    attempts: int
    #: exception text, ``"requeued"`` or ``"undecodable: ..."``
    error: str
    #: the retry or dead-letter topic it was sent to
    topic: str


@dataclasses.dataclass(frozen=True)
class ListenerHooks:
    """Optional callbacks around processing, each given what it needs to act.

    ``before_dispatch(message)``, ``after_dispatch(message, result, seconds)`` and
    ``on_error(message, exception)`` frame the endpoints; ``on_retry(dead_letter)`` and
    ``on_dead_letter(dead_letter)`` come once the broker confirmed the copy;
    ``on_commit(offsets, error)`` gets ``(topic, partition, next_offset)`` triples and None
    or the broker's error text; ``on_assign``/``on_revoke`` get ``(topic, partition)`` pairs.
    """

    before_dispatch: Callable[[Any], None] | None = None
    after_dispatch: Callable[[Any, Any, float], None] | None = None
    on_error: Callable[[Any, BaseException], None] | None = None
    on_retry: Callable[[DeadLetter], None] | None = None
    on_dead_letter: Callable[[DeadLetter], None] | None = None
    on_commit: Callable[[list[tuple[str, int, int]], str | None], None] | None = None
    on_assign: Callable[[list[tuple[str, int]]], None] | None = None
    on_revoke: Callable[[list[tuple[str, int]]], None] | None = None

    @property
    def around_dispatch(self) -> bool:
        """Whether a callback needs to run around each dispatch."""
        return (self.before_dispatch is not None or self.after_dispatch is not None
                or self.on_error is not None)

    def call(self, name: str, *args: Any) -> None:
        """Run callback ``name`` if set; log (never raise) what it raises."""
        callback = getattr(self, name)
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:  # noqa: BLE001 - a hook must not break delivery
            LOG.exception("Listener hook %s raised; ignored", name)


NO_HOOKS = ListenerHooks()


def as_hooks(value: Any) -> ListenerHooks:
    """The ``hooks`` listener option: a ListenerHooks, a dict of its fields, or None."""
    if value is None:
        return NO_HOOKS
    if isinstance(value, ListenerHooks):
        return value
    if isinstance(value, dict):
        fields = {f.name for f in dataclasses.fields(ListenerHooks)}
        unknown = sorted(set(value) - fields)
        if unknown:
            raise ConfigurationError(f"Unknown hook(s) {', '.join(unknown)}; known: "
                                     f"{', '.join(sorted(fields))}")
        for name, callback in value.items():
            if callback is not None and not callable(callback):
                raise ConfigurationError(f"hook {name} must be callable, got {callback!r}")
        return ListenerHooks(**value)
    raise ConfigurationError(f"hooks must be a ListenerHooks or a dict, got {value!r}")
