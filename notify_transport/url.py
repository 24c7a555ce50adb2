"""Parsing and printing transport URLs, as oslo.messaging 18.3.1 does.

``driver://[user:pass@]host[:port][,...]/[vhost][?key=val]`` parses and formats
back as oslo's; where oslo lets a malformed URL through, :meth:`TransportURL.parse`
raises :class:`InvalidTransportURL` naming the problem (doc/source/migration.rst).
Secrets (:func:`notify_transport.secrets.is_secret`) print as ``***``;
``format(reveal_secrets=True)`` gives the usable URL.
"""
from __future__ import annotations

import ipaddress
import logging
import re
from typing import Any, Iterable
from urllib import parse

from notify_transport.exceptions import InvalidTransportURL
from notify_transport.secrets import MASK, mask_value

LOG = logging.getLogger(__name__)

_DEFAULT_PORTS = {"kafka": 9092, "ntkafka": 9092, "rabbit": 5672}
#: DNS caps a name at 253 characters (255 octets on the wire)
MAX_HOSTNAME_LENGTH = 253
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class TransportHost:
    """One broker address with optional credentials. The password never shows in a repr."""

    __slots__ = ("hostname", "port", "username", "password")

    def __init__(self, hostname: str | None = None, port: int | None = None,
                 username: str | None = None, password: str | None = None) -> None:
        self.hostname = hostname
        self.port = port
        self.username = username
        self.password = password

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransportHost):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __hash__(self) -> int:
        return hash((self.hostname, self.port, self.username, self.password))

    def __repr__(self) -> str:
        return f"<TransportHost {self.format(reveal_secrets=False) or '(default)'}>"

    def netloc(self) -> str:
        """``host:port`` with IPv6 addresses in brackets, no credentials."""
        host = self.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self.port}" if self.port is not None else host

    def format(self, reveal_secrets: bool = False) -> str:
        """``user:pass@host:port`` as oslo writes it; the password as ``***`` unless revealed."""
        cred = ""
        if self.username is not None or self.password is not None:
            if self.username is not None:
                cred = parse.quote(self.username, "")
            if self.password is not None:
                cred += ":" + (parse.quote(self.password, "") if reveal_secrets else MASK)
            cred += "@"
        return cred + self.netloc()


class TransportURL:
    """A parsed transport URL: driver name, hosts, virtual host and query options.

    ``virtual_host`` is ``None`` when the URL has no path and ``""`` when it has
    an empty one (``kafka://h:9092/``); both mean "no vhost suffix" to Kafka.
    Equality and the hash ignore ``query`` and ``conf``, as in oslo.messaging.
    """

    def __init__(self, conf: Any = None, transport: str | None = None,
                 virtual_host: str | None = None, hosts: list[TransportHost] | None = None,
                 query: dict[str, str] | None = None) -> None:
        self.conf = conf
        self.transport = transport
        self.virtual_host = virtual_host
        self.hosts = list(hosts or [])
        self.query = dict(query or {})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransportURL):
            return NotImplemented
        return (self.transport, self.virtual_host, self.hosts) == (
            other.transport, other.virtual_host, other.hosts)

    def __hash__(self) -> int:
        return hash((tuple(self.hosts), self.transport, self.virtual_host))

    def __repr__(self) -> str:
        return f"<TransportURL {self.redacted()}>"

    def __str__(self) -> str:
        return self.format(reveal_secrets=False)

    def redacted(self) -> str:
        """The URL with every password and secret query value as ``***``, safe to log."""
        return self.format(reveal_secrets=False)

    def format(self, reveal_secrets: bool = False) -> str:
        """The URL as oslo.messaging's ``str()`` writes it.

        Secrets are masked unless ``reveal_secrets`` is true; with it,
        ``TransportURL.parse(None, url.format(reveal_secrets=True)) == url``.
        """
        netlocs = ",".join(h.format(reveal_secrets) for h in self.hosts)
        url = f"{self.transport}://{netlocs}/"
        if self.virtual_host:
            url += parse.quote(self.virtual_host)
        if self.query:
            pairs = []
            for key, values in self.query.items():
                for value in (values if isinstance(values, (list, tuple)) else [values]):
                    value = str(value)
                    shown = value if reveal_secrets else mask_value(str(key), value)
                    text = parse.quote_plus(value) if shown == value else parse.quote_plus(shown, safe="*")
                    pairs.append(f"{parse.quote_plus(str(key))}={text}")
            url += "?" + "&".join(pairs)
        return url

    def bootstrap_servers(self, default_port: int | None = None) -> list[str]:
        """``host:port`` strings, filling in the driver's default port."""
        port = default_port or _DEFAULT_PORTS.get(self.transport or "")
        out = []
        for host in self.hosts:
            h = TransportHost(host.hostname or "localhost", host.port or port)
            out.append(h.netloc())
        return out

    @classmethod
    def parse(cls, conf: Any = None, url: "str | TransportURL | None" = None) -> "TransportURL":
        """Parse ``url``, or ``conf.transport_url`` when ``url`` is empty."""
        if isinstance(url, TransportURL):
            return url
        if not url and conf is not None:
            url = conf.transport_url
        if not url:
            raise InvalidTransportURL(str(url), "No transport URL given")
        if not isinstance(url, str):
            raise InvalidTransportURL(repr(type(url)), f"Wrong URL type {type(url).__name__}: expected str")
        return _Parser(url).parse(cls, conf)


class _Parser:
    """One parse: the raw text, kept only to build redacted error messages."""

    def __init__(self, url: str) -> None:
        self.url = url

    def fail(self, problem: str) -> InvalidTransportURL:
        shown = redact_raw(self.url)
        if len(shown) > 200:
            shown = f"{shown[:200]}...({len(shown)} characters)"
        for secret in _raw_secrets(self.url):
            if len(secret) > 2:
                problem = problem.replace(secret, MASK)
        return InvalidTransportURL(shown, f"Invalid transport URL {shown!r}: {problem}")

    def parse(self, cls: type[TransportURL], conf: Any) -> TransportURL:
        match = _CONTROL.search(self.url)
        if match:
            raise self.fail(f"control character {match.group()!r} at position {match.start()}")
        try:
            parts = parse.urlparse(self.url)
        except ValueError as exc:  # brackets that are not an IP address, NFKC tricks
            problem = "the host part changes under NFKC normalization" if "NFKC" in str(exc) else str(exc)
            raise self.fail(problem) from None
        if not parts.scheme:
            raise self.fail("no driver (scheme) given; expected driver://[user:pass@]host[:port][,...]/[vhost]")
        if parts.fragment or self.url.endswith("#"):
            raise self.fail("'#' starts a fragment, which transport URLs do not have "
                            "(percent-encode '#' in a password as %23)")
        if parts.params:
            raise self.fail(f"';' parameters are not part of a virtual host: {parts.params!r}")
        if parts.path and not parts.path.startswith("/"):
            raise self.fail(f"{parts.path!r} after '{parts.scheme}:' is neither //hosts nor /vhost")
        virtual_host = None
        if parts.path.startswith("/"):
            raw_vhost = parts.path[1:]
            if _BAD_ESCAPE.search(raw_vhost):
                raise self.fail(f"invalid %-escape in virtual host {raw_vhost!r} "
                                "(write '%' as %25)")
            try:
                virtual_host = parse.unquote(raw_vhost, errors="strict")
            except UnicodeDecodeError:
                raise self.fail(f"virtual host {raw_vhost!r} is not UTF-8 once unescaped") from None
        query = {}
        if parts.query:
            for key, values in parse.parse_qs(parts.query).items():
                query[key] = ",".join(values)
        hosts = [self.host(text) for text in parts.netloc.split(",") if text]
        with_creds = [h.hostname for h in hosts if h.username is not None and h.password is not None]
        without_creds = [h.hostname for h in hosts if h.username is None or h.password is None]
        if with_creds and without_creds:
            LOG.warning("All hosts must be set with username/password or not at the same time. "
                        "Hosts with credentials are: %s. Hosts without credentials are %s.",
                        with_creds, without_creds)
        return cls(conf, parts.scheme, virtual_host, hosts, query)

    def host(self, text: str) -> TransportHost:
        username = password = None
        if "@" in text:
            username, text = text.rsplit("@", 1)
            if ":" in username:
                username, password = username.split(":", 1)
                password = parse.unquote(password)
            username = parse.unquote(username)
        hostname, port = self.host_port(text)
        return TransportHost(hostname, port, username, password)

    def host_port(self, text: str) -> tuple[str | None, int | None]:
        """oslo_utils.netutils.parse_host_port's split, with each malformed case refused."""
        if not text:
            return None, None  # credentials without a host: oslo's "creds_no_host"
        if len(text) > MAX_HOSTNAME_LENGTH + 8:
            raise self.fail(f"host name of {len(text)} characters; DNS allows {MAX_HOSTNAME_LENGTH}")
        if text.startswith("["):
            host, sep, tail = text[1:].partition("]")
            if not sep or (tail and not tail.startswith(":")):
                raise self.fail(f"expected [ipv6-address] or [ipv6-address]:port, got {text!r}")
            self.check_ipv6(host)
            return host, self.port(tail[1:], host) if tail else None
        if text.count(":") > 1:
            self.check_ipv6(text)  # oslo reads an unbracketed address with colons as IPv6, no port
            return text, None
        host, _, port_text = text.partition(":")
        if not host:
            raise self.fail(f"empty host name before port {port_text!r}" if port_text else "empty host name")
        self.check_hostname(host)
        return host, self.port(port_text, host) if ":" in text else None

    def port(self, text: str, host: str) -> int:
        if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
            raise self.fail(f"invalid port {text!r} for host {host!r}: expected a number from 1 to 65535")
        return int(text)

    def check_hostname(self, host: str) -> None:
        if len(host) > MAX_HOSTNAME_LENGTH:
            raise self.fail(f"host name of {len(host)} characters; DNS allows {MAX_HOSTNAME_LENGTH}")
        if any(c.isspace() for c in host):
            raise self.fail(f"white space in host name {host!r}")

    def check_ipv6(self, host: str) -> None:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise self.fail(f"{host[:80]!r} is not an IPv6 address (a host:port has one ':'; "
                            "an IPv6 address with a port goes in brackets)") from None


def _raw_secrets(url: str) -> Iterable[str]:
    """Password-looking pieces of a URL string that may not even parse."""
    rest = url.partition("://")[2] or url.partition(":")[2]
    netloc = re.split(r"[/?]", rest, maxsplit=1)[0]
    for part in netloc.split(","):
        cred = part.rpartition("@")[0]
        if ":" in cred:
            yield cred.split(":", 1)[1]
    for _key, value in parse.parse_qsl(url.partition("?")[2]):
        yield value


def redact_raw(url: str) -> str:
    """Hide passwords and secret query values in a URL string that may not even parse."""
    scheme, sep, rest = url.partition("://")
    if sep:
        netloc, slash, tail = rest.partition("/")
        before_query, qmark, query = tail.partition("?")
        if not slash:
            netloc, qmark, query = netloc.partition("?")
        hosts = []
        for part in netloc.split(","):
            cred, at, host = part.rpartition("@")
            if at and ":" in cred:
                part = f"{cred.split(':', 1)[0]}:{MASK}@{host}"
            hosts.append(part)
        url = f"{scheme}://{','.join(hosts)}{slash}{before_query}{qmark}{_redact_query(query)}"
    else:
        base, qmark, query = url.partition("?")
        url = f"{base}{qmark}{_redact_query(query)}"
    return url


def _redact_query(query: str) -> str:
    out = []
    for item in query.split("&") if query else []:
        key, eq, value = item.partition("=")
        if eq:
            masked = mask_value(parse.unquote_plus(key), parse.unquote_plus(value))
            value = value if masked == parse.unquote_plus(value) else parse.quote_plus(masked, safe="*:,=")
        out.append(f"{key}{eq}{value}")
    return "&".join(out)
