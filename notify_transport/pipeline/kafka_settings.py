"""How the pipeline connects to Kafka, from a ``kafka://`` transport URL.

The URL and the ``[oslo_messaging_kafka]`` options mean here what they mean to
the Kafka driver (hosts, vhost, SASL credentials in the URL or the options,
SSL files, ``?key=value`` overrides). :class:`KafkaSettings` renders them for
the two readers the pipeline can use: librdkafka properties for the
``notify_kafka`` Python data source, and Java client properties for Spark's
own ``kafka`` format.
"""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from oslo_config import cfg

from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.kafka import options as kafka_options
from notify_transport.drivers.kafka.client_properties import common_config, sasl_credentials
from notify_transport.exceptions import ConfigurationError, InvalidTransportURL
from notify_transport.url import TransportURL

LOG = logging.getLogger(__name__)

_SASL = ("SASL_PLAINTEXT", "SASL_SSL")
_SSL = ("SSL", "SASL_SSL")
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclasses.dataclass(frozen=True)
class KafkaSettings:
    """Connection settings of one Kafka cluster and the vhost the pipeline reads."""

    bootstrap_servers: tuple[str, ...]
    vhost: str | None = None
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = dataclasses.field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = dataclasses.field(default=None, repr=False)
    #: librdkafka properties from ``librdkafka_config`` and ``consumer_config``.
    extra: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False)
    #: the Kafka driver's connection properties for this URL (secrets included).
    rdkafka: tuple[tuple[str, Any], ...] = dataclasses.field(default=(), repr=False)
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
        opts = resolve_options(conf if conf is not None else cfg.ConfigOpts(), kafka_options.GROUP,
                               kafka_options.all_opts(), parsed.query, parsed.redacted())
        username, password = sasl_credentials(parsed, opts)
        rdkafka = common_config(parsed, opts)
        extra = {**{k: str(v) for k, v in opts.librdkafka_config.items()},
                 **{k: str(v) for k, v in opts.consumer_config.items()}}
        return cls(
            bootstrap_servers=tuple(parsed.bootstrap_servers()),
            vhost=parsed.virtual_host or None,
            security_protocol=opts.security_protocol,
            sasl_mechanism=opts.sasl_mechanism,
            sasl_username=username,
            sasl_password=password,
            ssl_cafile=opts.ssl_cafile or None,
            ssl_certfile=opts.ssl_client_cert_file or None,
            ssl_keyfile=opts.ssl_client_key_file or None,
            ssl_key_password=opts.ssl_client_key_password or None,
            extra=tuple(sorted(extra.items())),
            rdkafka=tuple(sorted(rdkafka.items())),
            url=parsed.redacted(),
        )

    @classmethod
    def from_bootstrap(cls, bootstrap_servers: str, vhost: str | None = None) -> "KafkaSettings":
        """Plain-text settings from a ``host:port[,host:port]`` list."""
        servers = tuple(s.strip() for s in bootstrap_servers.split(",") if s.strip())
        if not servers:
            raise ConfigurationError("No Kafka bootstrap server given")
        return cls(bootstrap_servers=servers, vhost=vhost or None,
                   url=f"kafka://{','.join(servers)}" + (f"/{vhost}" if vhost else ""))

    def librdkafka_config(self) -> dict[str, str]:
        """Consumer properties for confluent-kafka (secrets included: never log them).

        The connection part is the Kafka driver's own (``common_config``), so
        the pipeline connects exactly as listeners do.
        """
        config: dict[str, Any] = dict(self.rdkafka) or {
            "bootstrap.servers": ",".join(self.bootstrap_servers),
            "security.protocol": self.security_protocol}
        config.update(self.extra)
        return config

    def spark_kafka_options(self) -> dict[str, str]:
        """``kafka.*`` options of Spark's JVM ``kafka`` format for the same connection."""
        options = {"kafka.bootstrap.servers": ",".join(self.bootstrap_servers),
                   "kafka.security.protocol": self.security_protocol}
        if self.security_protocol in _SASL:
            options["kafka.sasl.mechanism"] = self.sasl_mechanism
            module = _JAAS_MODULES.get(self.sasl_mechanism.upper())
            if module is None:
                raise ConfigurationError(
                    f"SASL mechanism {self.sasl_mechanism!r} has no JAAS login module mapping for "
                    "Spark's kafka format; use the notify_kafka source")
            if self.sasl_username:
                options["kafka.sasl.jaas.config"] = (
                    f'{module} required username="{_jaas_quote(self.sasl_username)}" '
                    f'password="{_jaas_quote(self.sasl_password or "")}";')
        if self.security_protocol in _SSL:
            if self.ssl_cafile:
                options["kafka.ssl.truststore.type"] = "PEM"
                options["kafka.ssl.truststore.location"] = self.ssl_cafile
            if self.ssl_certfile and self.ssl_keyfile:
                # The Java client takes a PEM key store inline, not as two files.
                options["kafka.ssl.keystore.type"] = "PEM"
                options["kafka.ssl.keystore.certificate.chain"] = Path(self.ssl_certfile).read_text()
                options["kafka.ssl.keystore.key"] = Path(self.ssl_keyfile).read_text()
                if self.ssl_key_password:
                    options["kafka.ssl.key.password"] = self.ssl_key_password
        if self.extra:
            LOG.warning("librdkafka properties %s do not apply to Spark's kafka format; ignored",
                        ", ".join(k for k, _ in self.extra))
        return options

    def describe(self) -> dict[str, Any]:
        """What is safe to print: no password, no key."""
        return {"url": self.url, "vhost": self.vhost, "security_protocol": self.security_protocol}


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
