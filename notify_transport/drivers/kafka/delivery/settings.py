"""The delivery settings of one Kafka listener.

The ``[oslo_messaging_kafka]`` delivery options, overridden by the listener's
keyword options, validated here so that a bad combination fails when the
listener is created.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Mapping

from oslo_config import types

from notify_transport.drivers.kafka.delivery.hooks import NO_HOOKS, ListenerHooks, as_hooks
from notify_transport.drivers.kafka.naming import validate
from notify_transport.drivers.kafka.options import delivery_opts
from notify_transport.drivers.kafka.positions import StartPosition, parse_start_position
from notify_transport.drivers.naming import (DEFAULT_DEAD_LETTER_TOPIC, DEFAULT_RETRY_TOPIC, DISABLED,
                                             SIDE_TOPIC_FIELDS, side_topic, template_fields)
from notify_transport.exceptions import ConfigurationError, InvalidTarget
from notify_transport.precedence import Source, pick

LOG = logging.getLogger(__name__)

COMMIT_BEFORE_DISPATCH = "commit_before_dispatch"
AT_LEAST_ONCE = "at_least_once"
DELIVERY_MODES = (COMMIT_BEFORE_DISPATCH, AT_LEAST_ONCE)

#: Names of the delivery options, all accepted as listener keywords.
OPTION_NAMES = tuple(opt.name for opt in delivery_opts)
#: Listener keywords that are not oslo.config options.
EXTRA_KEYWORDS = ("hooks",)


@dataclasses.dataclass(frozen=True)
class ListenerSettings:
    """Validated delivery settings; see the option help in :mod:`notify_transport.drivers.kafka.options`."""

    delivery_mode: str = COMMIT_BEFORE_DISPATCH
    workers: int = 1
    max_in_flight: int = 1000
    commit_interval: float = 1.0
    #: template, or None when requeued notifications are not retried
    retry_topic: str | None = None
    #: template, or None when there is no dead-letter topic
    dead_letter_topic: str | None = None
    max_attempts: int = 3
    retry_delay: float = 5.0
    requeue_on_error: bool = True
    start_position: StartPosition = StartPosition()
    shutdown_timeout: float = 30.0
    hooks: ListenerHooks = NO_HOOKS

    @property
    def at_least_once(self) -> bool:
        return self.delivery_mode == AT_LEAST_ONCE

    @property
    def requeue_possible(self) -> bool:
        """Whether ``requeue()`` leads somewhere (a retry or the dead-letter topic)."""
        return self.retry_topic is not None or self.dead_letter_topic is not None

    @property
    def runs_processing(self) -> bool:
        """Whether the listener runs each dispatch itself (workers, hooks, at-least-once checks)."""
        return self.workers > 1 or self.hooks.around_dispatch or self.at_least_once

    def retry_topic_for(self, topic: str, pool: str) -> str | None:
        return None if self.retry_topic is None else topic_name(self.retry_topic, topic, pool)

    def dead_letter_topic_for(self, topic: str, pool: str) -> str | None:
        if self.dead_letter_topic is None:
            return None
        return topic_name(self.dead_letter_topic, topic, pool)


def topic_name(template: str, topic: str, pool: str) -> str:
    """Fill a retry / dead-letter template (:func:`~notify_transport.drivers.naming.side_topic`),
    checked to be a legal Kafka topic."""
    name = side_topic(template, topic, pool)
    try:
        validate(name)
    except InvalidTarget as exc:
        raise ConfigurationError(f"{template!r} gives an invalid Kafka topic name {name!r}: "
                                 f"{exc}") from None
    return name


def side_templates(retry_topic: Any, dead_letter_topic: Any) -> tuple[str | None, str | None]:
    """The retry and dead-letter templates that name a listener's side topics: the configured
    ones, the defaults where unset, None where disabled.

    Whether a listener copies anything there depends on its delivery mode
    (:func:`listener_settings`); the names never do, so the operator's tools
    label and find those topics with this same rule.
    """
    return (DEFAULT_RETRY_TOPIC if retry_topic is None else _template("retry_topic", retry_topic),
            DEFAULT_DEAD_LETTER_TOPIC if dead_letter_topic is None
            else _template("dead_letter_topic", dead_letter_topic))


def listener_settings(opts: Any, options: Mapping[str, Any]) -> ListenerSettings:
    """Settings from a listener's keyword ``options`` over the transport's resolved ``opts``
    (URL query over configuration group), in the order :mod:`notify_transport.precedence` keeps."""
    keywords = {Source.KEYWORD: options}
    values = {name: _checked(name, pick(name, keywords, getattr(opts, name))) for name in OPTION_NAMES}
    mode = values["delivery_mode"]
    if values["max_in_flight"] < values["workers"]:
        raise ConfigurationError(f"max_in_flight ({values['max_in_flight']}) must be at least "
                                 f"workers ({values['workers']})")
    at_least_once = mode == AT_LEAST_ONCE
    retry_template, dead_template = side_templates(values["retry_topic"], values["dead_letter_topic"])
    # an unset template is used when the mode calls for it, a configured one always
    retry = retry_template if values["retry_topic"] is not None or (
        at_least_once and values["max_attempts"] > 1) else None
    if retry is not None and values["max_attempts"] == 1:
        retry = None  # the first failure is the last attempt: nothing to retry
    dead = dead_template if values["dead_letter_topic"] is not None or (
        at_least_once or retry is not None) else None
    if dead is None and at_least_once:
        raise ConfigurationError("delivery_mode=at_least_once needs a dead_letter_topic: records "
                                 "that cannot be decoded or processed go there instead of being lost")
    if dead is None and retry is not None:
        raise ConfigurationError("retry_topic needs a dead_letter_topic for notifications whose "
                                 "attempts are exhausted")
    if retry is not None and "{pool}" not in retry:
        LOG.warning("retry_topic %r does not contain {pool}: pools sharing a topic would also "
                    "share its retries and dispatch each other's requeued notifications", retry)
    return ListenerSettings(
        delivery_mode=mode, workers=values["workers"], max_in_flight=values["max_in_flight"],
        commit_interval=float(values["commit_interval"]), retry_topic=retry, dead_letter_topic=dead,
        max_attempts=values["max_attempts"], retry_delay=float(values["retry_delay"]),
        requeue_on_error=values["requeue_on_error"],
        start_position=parse_start_position(values["start_position"]),
        shutdown_timeout=float(values["shutdown_timeout"]),
        hooks=as_hooks(options.get("hooks")))


#: Options whose values are checked here, not by their oslo.config type: topic templates
#: (a non-string is an error, not converted) and positions (datetimes and ints too).
_OWN_CHECKS = ("retry_topic", "dead_letter_topic", "start_position")
_BY_NAME = {opt.name: opt for opt in delivery_opts}


def _checked(name: str, value: Any) -> Any:
    """``value`` converted and range-checked by the option's oslo.config type (min, choices, ...).

    Keyword options of a listener bypass oslo.config, so the same type checks
    them; a bool is refused where a number is expected (``True`` is an int in Python).
    """
    if name in _OWN_CHECKS:
        return value
    kind = _BY_NAME[name].type
    if isinstance(value, bool) and not isinstance(kind, types.Boolean):
        raise ConfigurationError(f"Kafka listener option {name}={value!r}: a number is expected")
    if isinstance(kind, types.Integer) and isinstance(value, float):
        raise ConfigurationError(f"Kafka listener option {name}={value!r}: an integer is expected")
    if isinstance(kind, types.Boolean) and not isinstance(value, (bool, str)):
        raise ConfigurationError(f"Kafka listener option {name}={value!r}: true or false is expected")
    try:
        return kind(value)
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(f"Kafka listener option {name}={value!r}: {exc}") from None


def _template(name: str, value: Any) -> str | None:
    """A topic template, or None when unset or disabled; unknown placeholders are an error."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigurationError(f"{name} must be a string, got {value!r}")
    if value.strip().lower() in DISABLED:
        return None
    try:
        fields = template_fields(value)
    except ValueError as exc:
        raise ConfigurationError(f"{name} {value!r}: {exc}") from None
    unknown = fields - SIDE_TOPIC_FIELDS
    if unknown:
        raise ConfigurationError(f"{name} {value!r} uses unknown placeholder(s) "
                                 f"{', '.join(sorted(unknown))}; known: {{topic}}, {{pool}}")
    topic_name(value, "topic", "pool")  # a template that cannot name a topic fails now
    return value
