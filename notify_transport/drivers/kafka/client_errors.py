"""What a listener's Kafka consumer reports as errors, sorted into what stops it and what passes.

librdkafka reports a problem two ways: through ``error_cb`` (from any poll) and
as an error record among the records. Either may be permanent (a refused
login, an invalid group id, a fatal client): then the listener stops with
:class:`KafkaListenerError`. Anything else (a broker down, a leader moving) is
retried by the client and only logged here, at most once a second per kind at first and
further apart while it goes on; the client's statistics say when a broker answers again.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from confluent_kafka import KafkaError

from notify_transport.drivers.kafka.outage import ClientWarnings
from notify_transport.exceptions import MessagingException

LOG = logging.getLogger(__name__)

#: Errors that retrying cannot fix: raised out of start() and poll().
PERMANENT_ERRORS = frozenset(getattr(KafkaError, name) for name in (
    "INVALID_SESSION_TIMEOUT", "GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
    "INVALID_GROUP_ID", "SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION", "_INVALID_ARG",
    "UNSUPPORTED_VERSION", "_FATAL") if hasattr(KafkaError, name))


class KafkaListenerError(MessagingException):
    """The consumer hit an error that retrying cannot fix."""


def is_permanent(err: KafkaError) -> bool:
    """Whether ``err`` stops the listener rather than passing on its own."""
    return err.fatal() or err.code() in PERMANENT_ERRORS


class ClientErrors(ClientWarnings):
    """The errors of one consumer: the last one (for a timeout's message) and a permanent one."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(name, LOG, clock)
        self.last: KafkaError | None = None
        #: set from the client's error callback, raised by the next :meth:`raise_if_fatal`
        self.fatal: KafkaError | None = None

    def on_error(self, err: KafkaError) -> None:
        """librdkafka's ``error_cb``: runs inside a poll, so it records and never raises."""
        self.last = err
        if is_permanent(err):
            self.fatal = err
            LOG.error("%s: %s", self.name, err.str())
        else:
            self.warn(err)

    def raise_if_fatal(self) -> None:
        if self.fatal is not None:
            raise KafkaListenerError(f"{self.name}: {self.fatal.str()}")

    def on_record(self, err: KafkaError) -> None:
        """An error delivered as a record: raise what is permanent, log the rest."""
        if err.code() == KafkaError._PARTITION_EOF:
            return
        self.last = err
        if is_permanent(err):
            raise KafkaListenerError(f"{self.name}: {err.str()}")
        self.warn(err)
