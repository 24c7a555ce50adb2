"""How the pipeline connects to Kafka, from a ``kafka://`` transport URL.

The URL and ``[oslo_messaging_kafka]`` mean here what they mean to the driver: the
librdkafka properties come from the driver's one builder
(:func:`~notify_transport.drivers.kafka.client_properties.client_config`, consumer role).
:class:`KafkaSettings` hands them as they are to ``notify_kafka`` and translated to Java
client properties to Spark's ``kafka`` format.
"""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Mapping

from oslo_config import cfg

from notify_transport.drivers.config import resolve_options
from notify_transport.drivers import kafka as props
from notify_transport.drivers.kafka import GROUP as KAFKA_GROUP, all_opts as kafka_opts
from notify_transport.exceptions import ConfigurationError, InvalidTransportURL
from notify_transport.url import TransportURL

LOG = logging.getLogger(__name__)

#: The Java client's login module of each SASL mechanism the driver's options offer.
JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: librdkafka's name for how long the broker may hold a fetch that finds no new record.
FETCH_WAIT = "fetch.wait.max.ms"
#: What the connector's executors get when ``librdkafka_config`` does not say: they read ranges
#: the driver planned from offsets that exist, yet each task ends with one fetch past its range,
#: which the broker holds for the whole wait (the Java client's default: 500 ms, per partition
#: read). A short wait still keeps a range that cannot complete from polling in a tight loop.
CONNECTOR_FETCH_WAIT_MS = 10
#: librdkafka's names (one an alias of the other) for the most a fetch returns of one partition.
PARTITION_FETCH_BYTES = ("max.partition.fetch.bytes", "fetch.message.max.bytes")
#: What the connector's consumers fetch of a partition at once when nothing says otherwise and the
#: read is not capped (:func:`~notify_transport.pipeline.reading.source_options`): each task reads
#: one partition's range, and the Java client's 1 MiB (some 800 notifications) made the broker
#: answer so many fetches that on two cores it spent more CPU than the read (the pipeline docs give
#: the figures). A capped read keeps the client's default: a fetch may run past the task's range.
CONNECTOR_PARTITION_FETCH_BYTES = 16 * 1024 * 1024
#: librdkafka properties the translation to Java properties reads (or, for client.id, leaves out).
_TRANSLATED = frozenset({"bootstrap.servers", "security.protocol", "client.id", "sasl.mechanism",
                         "sasl.username", "sasl.password", FETCH_WAIT, *PARTITION_FETCH_BYTES}) \
    | {prop for _, prop in props.SSL_OPTIONS}


@dataclasses.dataclass(frozen=True)
class KafkaSettings:
    """Connection settings of one Kafka cluster and the vhost the pipeline reads."""

    bootstrap_servers: tuple[str, ...]
    vhost: str | None = None
    #: the librdkafka properties of a consumer on this transport (secrets included).
    properties: tuple[tuple[str, Any], ...] = dataclasses.field(default=(), repr=False)
    #: the transport URL without passwords, for messages.
    url: str = ""

    @classmethod
    def from_url(cls, url: str | TransportURL, conf: cfg.ConfigOpts | None = None) -> "KafkaSettings":
        """Parse a ``kafka://`` URL; options come from ``conf`` with the URL query on top."""
        parsed = TransportURL.parse(conf, url)
        if parsed.transport != "kafka":
            raise InvalidTransportURL(parsed.redacted(), f"The pipeline reads Kafka; {parsed.transport!r} "
                                      "transport URLs are not supported (use kafka://host:port/vhost)")
        if not parsed.hosts:
            raise InvalidTransportURL(parsed.redacted(), "The transport URL names no Kafka host")
        opts = resolve_options(conf if conf is not None else cfg.ConfigOpts(), KAFKA_GROUP,
                               kafka_opts(), parsed.query, parsed.redacted())
        properties = props.client_config(parsed, opts, props.CONSUMER)
        return cls(bootstrap_servers=tuple(parsed.bootstrap_servers()), vhost=parsed.virtual_host or None,
                   properties=tuple(sorted(properties.items())), url=parsed.redacted())

    def librdkafka_config(self) -> dict[str, Any]:
        """Consumer properties for confluent-kafka (secrets included: never log them)."""
        return dict(self.properties)

    @property
    def security_protocol(self) -> str:
        return str(dict(self.properties).get("security.protocol", "PLAINTEXT"))

    def spark_kafka_options(self) -> dict[str, str]:
        """``kafka.*`` options of Spark's JVM ``kafka`` format for the same connection."""
        conf = self.librdkafka_config()
        protocol = self.security_protocol
        options = {"kafka.bootstrap.servers": ",".join(self.bootstrap_servers),
                   "kafka.security.protocol": protocol,
                   "kafka.fetch.max.wait.ms": str(conf.get(FETCH_WAIT, CONNECTOR_FETCH_WAIT_MS))}
        fetch_bytes = next((conf[name] for name in PARTITION_FETCH_BYTES if name in conf), None)
        if fetch_bytes is not None:
            options["kafka.max.partition.fetch.bytes"] = str(fetch_bytes)
        if protocol.startswith("SASL"):
            mechanism = str(conf.get("sasl.mechanism", "PLAIN"))
            options["kafka.sasl.mechanism"] = mechanism
            module = JAAS_MODULES.get(mechanism.upper())
            if module is None:
                raise ConfigurationError(
                    f"SASL mechanism {mechanism!r} has no JAAS login module mapping for "
                    "Spark's kafka format; use the notify_kafka source")
            if conf.get("sasl.username"):
                options["kafka.sasl.jaas.config"] = jaas_config(module, {
                    "username": str(conf["sasl.username"]), "password": str(conf.get("sasl.password") or "")})
        if protocol.endswith("SSL"):
            if conf.get(props.CA_FILE):
                options["kafka.ssl.truststore.type"] = "PEM"
                options["kafka.ssl.truststore.location"] = str(conf[props.CA_FILE])
            if conf.get(props.CERT_FILE) and conf.get(props.KEY_FILE):
                # The Java client takes a PEM key store inline, not as two files.
                options["kafka.ssl.keystore.type"] = "PEM"
                options["kafka.ssl.keystore.certificate.chain"] = Path(conf[props.CERT_FILE]).read_text()
                options["kafka.ssl.keystore.key"] = Path(conf[props.KEY_FILE]).read_text()
                if conf.get(props.KEY_PASSWORD):
                    options["kafka.ssl.key.password"] = str(conf[props.KEY_PASSWORD])
        ignored = sorted(k for k in conf if k not in _TRANSLATED)
        if ignored:
            LOG.warning("librdkafka properties %s do not apply to Spark's kafka format; ignored",
                        ", ".join(ignored))
        return options

    def describe(self) -> dict[str, Any]:
        """What is safe to print: no password, no key."""
        return {"url": self.url, "vhost": self.vhost, "security_protocol": self.security_protocol}


def jaas_config(module: str, options: Mapping[str, str]) -> str:
    """A Java client's or broker's ``sasl.jaas.config``: ``module required key="value" ...;``,
    each value quoted so that a quote or backslash in a password cannot end it early."""
    quoted = " ".join(f'{key}="{_jaas_quote(value)}"' for key, value in options.items())
    return f"{module} required {quoted};"


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
