"""librdkafka configuration dicts built from the ``[oslo_messaging_kafka]`` options.

Kept free of any client object so that the mapping from oslo-style options to
librdkafka properties can be unit tested without a broker. Order of
precedence, lowest first: our defaults, the options (with the URL query
already applied), then the escape-hatch dicts ``librdkafka_config`` and
``producer_config`` / ``consumer_config``.
"""
from __future__ import annotations

import logging
import types
from typing import Any

from notify_transport.exceptions import ConfigurationError
from notify_transport.secrets import mask_properties as redact  # noqa: F401 - the clients' debug logs

#: SASL mechanisms librdkafka supports; the option value is matched case-insensitively.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
COMPRESSION_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
DEFAULT_PORT = 9092

#: librdkafka's own log lines go here (as the clients' ``logger``), not to stderr.
RDKAFKA_LOG = logging.getLogger("notify_transport.drivers.kafka.librdkafka")


def bootstrap_servers(url: Any) -> str:
    """``host:port,...`` from the URL hosts (default port 9092), IPv6 in brackets."""
    servers = url.bootstrap_servers(DEFAULT_PORT)
    if not servers:
        raise ConfigurationError(f"Transport URL {url.redacted()} names no Kafka broker; "
                                 "expected kafka://host[:port][,host[:port]...]")
    return ",".join(servers)


def sasl_credentials(url: Any, opts: types.SimpleNamespace) -> tuple[str | None, str | None]:
    """User and password: the URL's first host with a user name, else the options.

    oslo.messaging takes the credentials of the first host; every host of a
    cluster shares them.
    """
    for host in url.hosts:
        if host.username:
            return host.username, host.password
    return (opts.sasl_username or None), (opts.sasl_password or None)


def common_config(url: Any, opts: types.SimpleNamespace) -> dict[str, Any]:
    """Properties every client (producer, consumer, admin) needs: brokers and security."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers(url),
        "security.protocol": opts.security_protocol,
        "client.id": "notify-transport",
    }
    protocol = opts.security_protocol.upper()
    if protocol.startswith("SASL"):
        mechanism = (opts.sasl_mechanism or "PLAIN").upper()
        if mechanism not in SASL_MECHANISMS:
            raise ConfigurationError(
                f"Unsupported sasl_mechanism {opts.sasl_mechanism!r}; "
                f"expected one of {', '.join(SASL_MECHANISMS)}")
        conf["sasl.mechanism"] = mechanism
        username, password = sasl_credentials(url, opts)
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            if not username:
                raise ConfigurationError(
                    f"security_protocol {protocol} with sasl_mechanism {mechanism} needs a user "
                    f"name: put user:password in the transport URL or set sasl_username")
            conf["sasl.username"] = username
            conf["sasl.password"] = password or ""
    if protocol.endswith("SSL"):
        for option, prop in (("ssl_cafile", "ssl.ca.location"),
                             ("ssl_client_cert_file", "ssl.certificate.location"),
                             ("ssl_client_key_file", "ssl.key.location"),
                             ("ssl_client_key_password", "ssl.key.password")):
            value = getattr(opts, option)
            if value:
                conf[prop] = value
    return conf


#: Properties confluent-kafka reads itself and wants as Python booleans; the
#: escape-hatch dicts give strings, which are converted.
_PYTHON_BOOL_PROPERTIES = ("delivery.report.only.error",)


def _python_types(conf: dict[str, Any]) -> dict[str, Any]:
    for key in _PYTHON_BOOL_PROPERTIES:
        value = conf.get(key)
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ConfigurationError(f"{key} must be true or false, got {value!r}")
            conf[key] = lowered in ("true", "1", "yes")
    return conf


def producer_config(url: Any, opts: types.SimpleNamespace) -> dict[str, Any]:
    """Producer properties: delivery guarantees, batching, compression."""
    codec = opts.compression_codec
    if codec not in COMPRESSION_CODECS:
        raise ConfigurationError(f"Unsupported compression_codec {codec!r}; "
                                 f"expected one of {', '.join(COMPRESSION_CODECS)}")
    idempotent = bool(opts.enable_idempotence)
    acks = opts.producer_acks
    if idempotent and acks != "all":
        raise ConfigurationError(f"enable_idempotence requires producer_acks=all (got {acks!r}); "
                                 "set enable_idempotence=false to use fewer acks")
    conf = common_config(url, opts)
    conf.update({
        "acks": acks,
        "enable.idempotence": idempotent,
        "compression.codec": codec,
        # oslo.messaging maps producer_batch_timeout to linger.ms too; its
        # default (0) falls back to producer_linger, see the option's help
        "linger.ms": (opts.producer_batch_timeout or opts.producer_linger) * 1000.0,
        "batch.num.messages": opts.producer_batch_size,
        "message.timeout.ms": max(1, int(opts.delivery_timeout * 1000)),
        # failures are reported and counted; successes are what is neither failed
        # nor pending, which spares a Python callback per notification
        "delivery.report.only.error": True,
    })
    conf.update(opts.librdkafka_config)
    conf.update(opts.producer_config)
    return _python_types(conf)


def consumer_config(url: Any, opts: types.SimpleNamespace, group_id: str) -> dict[str, Any]:
    """Consumer properties. Offsets are stored and committed by the listener, never implicitly."""
    session_ms = int(opts.session_timeout * 1000)
    heartbeat_ms = int(opts.heartbeat_interval * 1000)
    if heartbeat_ms >= session_ms:
        raise ConfigurationError(f"heartbeat_interval ({opts.heartbeat_interval}s) must be "
                                 f"lower than session_timeout ({opts.session_timeout}s)")
    conf = common_config(url, opts)
    conf.update({
        "group.id": group_id,
        "enable.auto.commit": bool(opts.enable_auto_commit),
        # the commit policy stores exactly the offsets it means to commit
        "enable.auto.offset.store": False,
        "auto.offset.reset": opts.auto_offset_reset,
        "max.partition.fetch.bytes": opts.kafka_max_fetch_bytes,
        # a bounded read-ahead: less memory, and no fetch requests while the
        # listener is still busy with what it has (see prefetch_messages)
        "queued.min.messages": opts.prefetch_messages,
        "fetch.queue.backoff.ms": int(round(opts.prefetch_backoff * 1000)),
        "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": heartbeat_ms,
        "enable.partition.eof": False,
        # spreads several single-partition topics over the pool's listeners
        "partition.assignment.strategy": "roundrobin",
    })
    conf.update(opts.librdkafka_config)
    conf.update(opts.consumer_config)
    return conf


def admin_config(url: Any, opts: types.SimpleNamespace) -> dict[str, Any]:
    """AdminClient properties (topic creation)."""
    conf = common_config(url, opts)
    conf.update(opts.librdkafka_config)
    return conf
