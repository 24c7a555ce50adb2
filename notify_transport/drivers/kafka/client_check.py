"""Checking librdkafka client properties when a transport is built, not at the first send.

:func:`check_clients` creates clients without ``bootstrap.servers`` (no
connection) and destroys them: what librdkafka refuses becomes a
:class:`ConfigurationError` naming the property; TLS files are checked first.
"""
from __future__ import annotations

import logging
import os
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException

from notify_transport.drivers.kafka.client_properties import CA_FILE, TLS_FILE_OPTIONS, ssl_properties
from notify_transport.exceptions import ConfigurationError
from notify_transport.secrets import MASK, is_secret

LOG = logging.getLogger(__name__)

#: Values of ssl.ca.location that are not a path.
_CA_KEYWORDS = ("probe",)
#: Properties the check sets itself: no broker, and librdkafka's own warnings (consumer
#: properties given to the producer, ...) kept out of the logs.
_CHECK_OVERRIDES = {"log_level": 0}
#: Unquoted secret values shorter than this are left alone in an error text.
_SCRUB_MIN_LENGTH = 6
_NOT_FOR_THE_CHECK = ("bootstrap.servers", "metadata.broker.list", "logger", "error_cb",
                      "on_delivery", "on_commit", "stats_cb", "throttle_cb", "oauth_cb")


def check_tls_files(conf: dict[str, Any], options: dict[str, str] | None = None) -> None:
    """Each TLS file of ``conf`` exists and is readable; else an error naming option and path.

    ``options``: for each property, the value its option had (to tell a file
    set by an option from one set through ``librdkafka_config``).
    """
    options = options or {}
    for option, prop in TLS_FILE_OPTIONS:
        path = conf.get(prop)
        if not path or (prop == CA_FILE and str(path).lower() in _CA_KEYWORDS):
            continue
        path = str(path)
        source = option if options.get(prop) == path else f"librdkafka property {prop}"
        if not os.path.exists(path):
            raise ConfigurationError(f"Kafka TLS: {source} names {path!r}, which does not exist")
        if prop == CA_FILE and os.path.isdir(path):
            continue  # a directory of CA certificates
        if not os.path.isfile(path):
            raise ConfigurationError(f"Kafka TLS: {source} names {path!r}, which is not a file")
        if not os.access(path, os.R_OK):
            raise ConfigurationError(f"Kafka TLS: {source} names {path!r}, which this process "
                                     f"(uid {os.getuid()}) cannot read")


def option_files(opts: Any) -> dict[str, str]:
    """``{librdkafka property: value of its TLS option}`` for :func:`check_tls_files`."""
    return ssl_properties(opts)


def check_clients(producer_conf: dict[str, Any], consumer_conf: dict[str, Any],
                  options: dict[str, str] | None = None) -> None:
    """Let librdkafka validate both configurations now; raise ConfigurationError if it refuses."""
    check_tls_files(producer_conf, options)
    check_tls_files(consumer_conf, options)
    _create(confluent_kafka.Producer, "producer", producer_conf)
    _create(confluent_kafka.Consumer, "consumer", consumer_conf)


def _create(kind: Any, what: str, conf: dict[str, Any]) -> None:
    trial = {k: v for k, v in conf.items() if k not in _NOT_FOR_THE_CHECK}
    trial.update(_CHECK_OVERRIDES)
    protocol = str(trial.get("security.protocol", "plaintext")).lower()
    if protocol.startswith("sasl"):
        # property names and values are still checked, but no SASL login runs here
        # (GSSAPI would run kinit, OAUTHBEARER/OIDC would fetch a token)
        trial["security.protocol"] = "ssl" if protocol.endswith("ssl") else "plaintext"
    if what == "consumer" and not trial.get("group.id"):
        trial["group.id"] = "notify-transport-check"  # each listener names its own group
    try:
        client = kind(trial)
    except KafkaException as exc:
        raise ConfigurationError(f"Invalid Kafka {what} configuration: {_scrub(exc.args[0].str(), conf)} "
                                 f"(check librdkafka_config, {what}_config, the TLS options and "
                                 f"the transport URL query)") from None
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"Invalid Kafka {what} configuration: "
                                 f"{_scrub(str(exc), conf)}") from None
    try:
        if what == "consumer":
            client.close()
        else:
            client.flush(0)
    except (KafkaException, RuntimeError) as exc:  # nothing was connected: nothing to lose
        LOG.debug("Closing the trial Kafka %s: %s", what, exc)


def _scrub(text: str, conf: dict[str, Any]) -> str:
    """``text`` without the value of any secret property (an error may quote a value)."""
    for key, value in conf.items():
        if not value or not isinstance(value, str) or not is_secret(key):
            continue
        for quoted in (f'"{value}"', f"'{value}'"):
            text = text.replace(quoted, f'"{MASK}"')
        if len(value) >= _SCRUB_MIN_LENGTH:  # shorter ones would hit ordinary words
            text = text.replace(value, MASK)
    return text
