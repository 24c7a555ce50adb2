"""Connection settings from the transport URL and ``[oslo_messaging_rabbit]``.

Hosts, credentials and virtual host come from the URL as in oslo.messaging:
no host at all means ``localhost:5672`` as guest; a host without a user name
logs in as guest (kombu's default); no or empty path means vhost ``/``.
Passwords live only in the pika credentials object; nothing here prints them.
"""
from __future__ import annotations

import logging
import os
import random
import ssl
import sys
import uuid
from dataclasses import dataclass
from types import SimpleNamespace

import pika

from notify_transport.backoff import Backoff
from notify_transport.exceptions import ConfigurationError
from notify_transport.url import TransportHost, TransportURL

LOG = logging.getLogger(__name__)

DEFAULT_PORT = 5672

_SSL_VERSIONS = {
    "tlsv1": ssl.TLSVersion.TLSv1,
    "tlsv1_1": ssl.TLSVersion.TLSv1_1,
    "tlsv1_2": ssl.TLSVersion.TLSv1_2,
    "tlsv1_3": ssl.TLSVersion.TLSv1_3,
}


@dataclass(frozen=True)
class Endpoint:
    """One broker address with its login. ``repr`` shows no password."""

    host: str
    port: int
    username: str
    password: str

    def __repr__(self) -> str:
        return f"<Endpoint {self.netloc} user={self.username}>"

    @property
    def netloc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class RabbitSettings:
    """What a connection needs: endpoints in failover order, vhost, timings, TLS."""

    def __init__(self, url: TransportURL, opts: SimpleNamespace) -> None:
        self.opts = opts
        self.virtual_host = url.virtual_host or "/"
        hosts = url.hosts or [TransportHost("localhost", DEFAULT_PORT, "guest", "guest")]
        self.endpoints = [self._endpoint(h) for h in hosts]
        if len(self.endpoints) > 1:
            # As oslo.messaging: spread the clients of a cluster over its nodes.
            random.shuffle(self.endpoints)
        #: hosts and vhost, without credentials or query, for log lines
        self.url_for_logs = url.redacted().split("?", 1)[0]
        if opts.rabbit_login_method not in ("PLAIN", "AMQPLAIN", "EXTERNAL"):
            raise ConfigurationError(f"rabbit_login_method {opts.rabbit_login_method!r} is not "
                                     "supported by pika; use PLAIN, AMQPLAIN or EXTERNAL")
        self._ssl_context = build_ssl_context(opts) if opts.ssl else None
        #: Spacing of the rounds over the hosts after ``n`` failed rounds, as kombu's
        #: ensure_connection spaces them: interval + (n-1) * backoff, capped, plus the splay.
        self.reconnect_backoff = Backoff(
            initial=float(opts.rabbit_retry_interval), factor=1.0,
            step=float(opts.rabbit_retry_backoff), maximum=float(opts.rabbit_interval_max),
            jitter=float(opts.kombu_reconnect_splay))

    @staticmethod
    def _endpoint(host: TransportHost) -> Endpoint:
        user = host.username or "guest"
        password = host.password if host.password is not None else ("guest" if not host.username else "")
        return Endpoint(host.hostname or "localhost", host.port or DEFAULT_PORT, user, password)

    def connection_name(self, purpose: str) -> str:
        """What the broker shows for the connection, as oslo names them."""
        return f"{os.path.basename(sys.argv[0])}:{os.getpid()}:{purpose}:{uuid.uuid4()}"

    def parameters(self, endpoint: Endpoint, purpose: str) -> pika.ConnectionParameters:
        if self.opts.rabbit_login_method == "EXTERNAL":
            credentials: pika.credentials.VALID_TYPES = pika.credentials.ExternalCredentials()
        else:  # AMQPLAIN and PLAIN carry the same user and password
            credentials = pika.PlainCredentials(endpoint.username, endpoint.password)
        ssl_options = None
        if self._ssl_context is not None:
            ssl_options = pika.SSLOptions(self._ssl_context, endpoint.host)
        timeout = float(self.opts.connection_timeout)
        return pika.ConnectionParameters(
            host=endpoint.host, port=endpoint.port, virtual_host=self.virtual_host,
            credentials=credentials, ssl_options=ssl_options,
            heartbeat=pika_heartbeat(int(self.opts.heartbeat_timeout_threshold)),
            connection_attempts=1, socket_timeout=timeout, stack_timeout=timeout * 2,
            client_properties={"connection_name": self.connection_name(purpose),
                               "product": "notify-transport",
                               "capabilities": {"authentication_failure_close": True,
                                                "connection.blocked": True,
                                                "consumer_cancel_notify": True}})

    def next_order(self) -> list[Endpoint]:
        """Endpoints for the next round, per ``kombu_failover_strategy``."""
        if self.opts.kombu_failover_strategy == "shuffle":
            order = list(self.endpoints)
            random.shuffle(order)
            return order
        return list(self.endpoints)


#: Seconds pika adds to the heartbeat it negotiated to get the period of its liveness check.
PIKA_CHECK_GRACE = 5
#: Seconds kept free below ``threshold`` for a check timer that fires late on a busy machine.
TIMER_MARGIN = 1


def pika_heartbeat(threshold: int) -> int:
    """The heartbeat to negotiate so that a silent broker is noticed within two ``threshold`` s.

    pika closes a connection when one whole check period (heartbeat + 5 s)
    passed without a byte from the broker, so a node that went quiet just
    after a check is noticed two periods later. Negotiating ``threshold - 6``
    makes the period a second shorter than ``threshold``; thresholds of 7 s
    and less get the shortest heartbeat pika allows (1 s), and 0 still turns
    heartbeats off.
    """
    if threshold <= 0:
        return 0
    return max(1, threshold - PIKA_CHECK_GRACE - TIMER_MARGIN)


def build_ssl_context(opts: SimpleNamespace) -> ssl.SSLContext:
    """TLS as oslo.messaging sets it up.

    With ``ssl_ca_file`` the broker certificate is verified, and its host name
    unless ``ssl_enforce_hostname_verification`` is off. Without a CA file
    oslo connects without verifying the broker, and so does this, with a warning.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    version = (opts.ssl_version or "").lower()
    if version and version != "sslv23":
        if version not in _SSL_VERSIONS:
            raise ConfigurationError(f"Invalid SSL version : {opts.ssl_version}")
        ctx.minimum_version = ctx.maximum_version = _SSL_VERSIONS[version]
    if opts.ssl_ca_file:
        ctx.load_verify_locations(cafile=opts.ssl_ca_file)
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.check_hostname = bool(opts.ssl_enforce_hostname_verification)
    else:
        LOG.warning("[oslo_messaging_rabbit] ssl is on without ssl_ca_file: the broker's "
                    "certificate is not verified")
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if opts.ssl_cert_file:
        ctx.load_cert_chain(opts.ssl_cert_file, opts.ssl_key_file or None)
    return ctx
