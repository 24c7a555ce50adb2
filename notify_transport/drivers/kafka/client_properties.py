"""librdkafka configuration dicts built from the ``[oslo_messaging_kafka]`` options: the one builder.

Free of client objects so that it is unit tested without a broker. Every client
gets its properties from :func:`client_config`; precedence, lowest first: the
connection, the role's defaults, ``librdkafka_config``, then
``producer_config``/``consumer_config``.
"""
from __future__ import annotations

import logging
import types
import uuid
from typing import Any, Mapping

from notify_transport.exceptions import ConfigurationError

#: SASL mechanisms librdkafka supports; the option value is matched case-insensitively.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
#: SASL mechanisms that log in with a user name and a password.
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_PORT = 9092

#: The TLS properties librdkafka takes.
CA_FILE = "ssl.ca.location"
CERT_FILE = "ssl.certificate.location"
KEY_FILE = "ssl.key.location"
KEY_PASSWORD = "ssl.key.password"
#: Each TLS option of ``[oslo_messaging_kafka]`` and the librdkafka property it sets: the one
#: mapping (the clients, the file checks of :mod:`.client_check` and the pipeline use it).
SSL_OPTIONS = (("ssl_cafile", CA_FILE), ("ssl_client_cert_file", CERT_FILE),
               ("ssl_client_key_file", KEY_FILE), ("ssl_client_key_password", KEY_PASSWORD))
#: The TLS options that name files librdkafka loads when a client is created.
TLS_FILE_OPTIONS = tuple((option, prop) for option, prop in SSL_OPTIONS if prop != KEY_PASSWORD)

#: Client roles of :func:`client_config`; each but the admin has an escape-hatch option.
PRODUCER, CONSUMER, ADMIN = "producer", "consumer", "admin"

#: librdkafka's own log lines go here (as the clients' ``logger``), not to stderr.
RDKAFKA_LOG = logging.getLogger("notify_transport.drivers.kafka.librdkafka")

#: librdkafka's facility for a broker connection that failed or dropped: each such line
#: comes with the same error handed to the client's ``error_cb``.
_CONNECTION_FAILURE = "FAIL"


class _ConnectionFailuresAtDebug(logging.LoggerAdapter):
    """librdkafka's lines, its connection failures at debug: for clients whose ``error_cb``
    logs those failures already (rate limited, further apart as an outage goes on), where
    librdkafka writes an error line for every attempt (three a second while a broker is down)."""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        # confluent-kafka calls log(level, "%s [%s] %s", facility, client name, text)
        if level > logging.DEBUG and args and args[0] == _CONNECTION_FAILURE:
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)


#: The ``logger`` of a client whose ``error_cb`` reports connection failures (the producer's and
#: the listener's log them, the cluster client's names them in its errors): the same logger,
#: without librdkafka's copy of each failure above debug.
RDKAFKA_LOG_BESIDE_ERROR_CB = _ConnectionFailuresAtDebug(RDKAFKA_LOG, {})


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


def ssl_properties(opts: types.SimpleNamespace) -> dict[str, str]:
    """``{librdkafka property: value}`` of the TLS options that are set."""
    return {prop: getattr(opts, option) for option, prop in SSL_OPTIONS if getattr(opts, option, None)}


def common_config(url: Any, opts: types.SimpleNamespace) -> dict[str, Any]:
    """Properties every client (producer, consumer, admin) needs: brokers and security.

    ``security_protocol`` is one of the option's ``choices`` (oslo.config checks it).
    """
    protocol = opts.security_protocol
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers(url),
        "security.protocol": protocol,
        "client.id": "notify-transport",
    }
    if protocol.startswith("SASL"):
        mechanism = (opts.sasl_mechanism or "PLAIN").upper()
        if mechanism not in SASL_MECHANISMS:
            raise ConfigurationError(
                f"Unsupported sasl_mechanism {opts.sasl_mechanism!r}; "
                f"expected one of {', '.join(SASL_MECHANISMS)}")
        conf["sasl.mechanism"] = mechanism
        username, password = sasl_credentials(url, opts)
        if mechanism in PASSWORD_MECHANISMS:
            if not username:
                raise ConfigurationError(
                    f"security_protocol {protocol} with sasl_mechanism {mechanism} needs a user "
                    f"name: put user:password in the transport URL or set sasl_username")
            conf["sasl.username"] = username
            conf["sasl.password"] = password or ""
    if protocol.endswith("SSL"):
        conf.update(ssl_properties(opts))
    return conf


def client_config(url: Any, opts: types.SimpleNamespace, role: str,
                  defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The properties of one client: :func:`common_config`, the role's ``defaults``, then
    ``librdkafka_config`` and the role's escape hatch (``producer_config`` / ``consumer_config``).

    With no ``defaults`` this is what every client of ``role`` on this
    transport shares: the pipeline adds how it reads on top.
    """
    conf = common_config(url, opts)
    conf.update(defaults or {})
    conf.update(opts.librdkafka_config)
    if role != ADMIN:
        conf.update(getattr(opts, f"{role}_config"))
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


#: The most notifications one producer holds unconfirmed (librdkafka's queue.buffering.max.messages):
#: two minutes of 800 notifications a second.
PRODUCER_QUEUE_MESSAGES = 100_000
#: The most bytes of notifications one producer holds unconfirmed (queue.buffering.max.kbytes).
PRODUCER_QUEUE_BYTES = 128 * 1024 * 1024


def producer_config(url: Any, opts: types.SimpleNamespace) -> dict[str, Any]:
    """Producer properties: delivery guarantees, batching, compression
    (``compression_codec`` and ``producer_acks`` are checked by their options' ``choices``)."""
    idempotent = bool(opts.enable_idempotence)
    acks = opts.producer_acks
    if idempotent and acks != "all":
        raise ConfigurationError(f"enable_idempotence requires producer_acks=all (got {acks!r}); "
                                 "set enable_idempotence=false to use fewer acks")
    return _python_types(client_config(url, opts, PRODUCER, {
        "acks": acks,
        "enable.idempotence": idempotent,
        "compression.codec": opts.compression_codec,
        # oslo.messaging maps producer_batch_timeout to linger.ms too; its
        # default (0) falls back to producer_linger, see the option's help
        "linger.ms": (opts.producer_batch_timeout or opts.producer_linger) * 1000.0,
        "batch.num.messages": opts.producer_batch_size,
        "message.timeout.ms": max(1, int(opts.delivery_timeout * 1000)),
        # what a sender may hold while the cluster cannot take writes: at most this many
        # notifications and bytes (producer_config overrides either); past it a send waits
        # producer_queue_timeout for room, then fails and is counted
        "queue.buffering.max.messages": PRODUCER_QUEUE_MESSAGES,
        "queue.buffering.max.kbytes": PRODUCER_QUEUE_BYTES // 1024,
        # failures are reported and counted; successes are what is neither failed
        # nor pending, which spares a Python callback per notification
        "delivery.report.only.error": True,
    }))


def _group_timeouts(opts: types.SimpleNamespace) -> dict[str, int]:
    session_ms = int(opts.session_timeout * 1000)
    heartbeat_ms = int(opts.heartbeat_interval * 1000)
    if heartbeat_ms >= session_ms:
        raise ConfigurationError(f"heartbeat_interval ({opts.heartbeat_interval}s) must be "
                                 f"lower than session_timeout ({opts.session_timeout}s)")
    return {"session.timeout.ms": session_ms, "heartbeat.interval.ms": heartbeat_ms}


#: ``group_protocol`` values: the classic rebalance protocol, and Kafka 4's KIP-848 protocol.
CLASSIC, KIP848 = "classic", "consumer"


def group_protocol_config(opts: types.SimpleNamespace) -> dict[str, Any]:
    """The group membership properties of ``group_protocol``.

    With KIP-848 the broker owns the session, the heartbeat and the assignor:
    librdkafka refuses the client-side properties, so none is set.
    """
    if getattr(opts, "group_protocol", CLASSIC) == KIP848:
        return {"group.protocol": KIP848}
    # spreads several single-partition topics over the pool's listeners
    return {**_group_timeouts(opts), "partition.assignment.strategy": "roundrobin"}


def consumer_config(url: Any, opts: types.SimpleNamespace, group_id: str) -> dict[str, Any]:
    """Consumer properties. Offsets are stored and committed by the listener, never implicitly."""
    return client_config(url, opts, CONSUMER, {
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
        **group_protocol_config(opts),
        "enable.partition.eof": False,
    })


def reader_config(url: Any, opts: types.SimpleNamespace) -> dict[str, Any]:
    """Consumer properties for reading without a group (:mod:`.reader`): never commits.

    ``group.id`` is set because the client requires one, but a reader never
    subscribes or commits, so no group is ever joined.
    """
    return without_group(client_config(url, opts, CONSUMER, {
        "auto.offset.reset": "earliest",
        "max.partition.fetch.bytes": opts.kafka_max_fetch_bytes,
        # unused without a group, but the escape hatch may hold settings checked against them
        **_group_timeouts(opts),
    }))


def without_group(config: Mapping[str, Any]) -> dict[str, Any]:
    """Consumer properties ``config`` for a client that assigns partitions itself and never commits.

    The client refuses to start without a ``group.id``: a throwaway one is
    given (kept if ``config`` has one), and no group is joined since the
    client never subscribes. Commits and stored offsets are switched off.
    """
    return {"group.id": f"notify-transport-reader-{uuid.uuid4().hex[:8]}", **config,
            "enable.auto.commit": False, "enable.auto.offset.store": False}


def admin_config(url: Any, opts: types.SimpleNamespace) -> dict[str, Any]:
    """AdminClient properties (topic creation)."""
    return client_config(url, opts, ADMIN)


#: Properties only a consumer takes (librdkafka's CONFIGURATION.md marks them ``C``).
_CONSUMER_ONLY_PREFIXES = ("group.", "fetch.", "queued.", "enable.auto.", "auto.", "isolation.",
                           "offset.store.", "coordinator.")
_CONSUMER_ONLY = frozenset({"partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms",
                            "max.poll.interval.ms", "max.partition.fetch.bytes", "enable.partition.eof",
                            "check.crcs", "consume.callback.max.messages", "on_commit"})


def admin_properties(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A consumer's properties made fit for an AdminClient: the consumer-only ones removed."""
    return {k: v for k, v in conf.items()
            if k not in _CONSUMER_ONLY and not k.startswith(_CONSUMER_ONLY_PREFIXES)}

