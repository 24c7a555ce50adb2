"""Parsing and printing transport URLs.

``driver://[user:pass@]host[:port][,[user:pass@]host[:port]...]/[vhost][?key=val]``

Leaf module: drivers receive a :class:`TransportURL` and read its fields.
"""
from __future__ import annotations

from typing import Any
from urllib import parse

from notify_transport.exceptions import InvalidTransportURL

_DEFAULT_PORTS = {"kafka": 9092, "rabbit": 5672}


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
        user = f"{self.username}:***@" if self.password else (f"{self.username}@" if self.username else "")
        return f"<TransportHost {user}{self.netloc()}>"

    def netloc(self) -> str:
        """``host:port`` with IPv6 addresses in brackets, no credentials."""
        host = self.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self.port}" if self.port is not None else host


class TransportURL:
    """A parsed transport URL: driver name, hosts, virtual host and query options.

    ``virtual_host`` is ``None`` when the URL has no path and ``""`` when it has
    an empty one (``kafka://h:9092/``); both mean "no vhost suffix" to Kafka.
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
        return (self.transport, self.virtual_host, self.hosts, self.query) == (
            other.transport, other.virtual_host, other.hosts, other.query)

    def __hash__(self) -> int:
        return hash((self.transport, self.virtual_host, tuple(self.hosts)))

    def __repr__(self) -> str:
        return f"<TransportURL {self.redacted()}>"

    def __str__(self) -> str:
        return self._format(redact=False)

    def redacted(self) -> str:
        """The URL with every password replaced by ``***``, safe to log."""
        return self._format(redact=True)

    def _format(self, redact: bool) -> str:
        netlocs = []
        for host in self.hosts:
            cred = ""
            if host.username is not None:
                cred = parse.quote(host.username, safe="")
                if host.password is not None:
                    cred += ":" + ("***" if redact else parse.quote(host.password, safe=""))
                cred += "@"
            netlocs.append(cred + host.netloc())
        url = f"{self.transport}://{','.join(netlocs)}"
        if self.virtual_host is not None:
            url += "/" + parse.quote(self.virtual_host, safe="")
        if self.query:
            url += "?" + parse.urlencode(self.query)
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
    def parse(cls, conf: Any = None, url: str | None = None) -> "TransportURL":
        """Parse ``url``, or ``conf.transport_url`` when ``url`` is None."""
        if url is None and conf is not None:
            url = conf.transport_url
        if not url:
            raise InvalidTransportURL(str(url), "No transport URL given")
        if isinstance(url, TransportURL):
            return url
        if "://" not in url:
            raise InvalidTransportURL(_redact_raw(url), f"Invalid transport URL {_redact_raw(url)!r}: "
                                      "expected driver://[user:pass@]host[:port][,...]/[vhost]")
        scheme, rest = url.split("://", 1)
        if not scheme or not scheme.replace("+", "").replace("-", "").replace("_", "").isalnum():
            raise InvalidTransportURL(_redact_raw(url), f"Invalid driver name {scheme!r} in transport URL")
        rest, _, fragment = rest.partition("#")
        rest, _, query_str = rest.partition("?")
        netloc, slash, path = rest.partition("/")
        virtual_host = parse.unquote(path) if slash else None
        query: dict[str, str] = {}
        try:
            for key, values in parse.parse_qs(query_str, keep_blank_values=True,
                                              strict_parsing=bool(query_str)).items():
                query[key] = ",".join(values)
        except ValueError as exc:
            raise InvalidTransportURL(_redact_raw(url), f"Invalid query string in transport URL: {exc}") from None
        hosts = [cls._parse_host(url, h) for h in netloc.split(",")] if netloc else []
        hosts = [h for h in hosts if h is not None]
        return cls(conf=conf, transport=scheme.lower(), virtual_host=virtual_host,
                   hosts=hosts, query=query)

    @staticmethod
    def _parse_host(url: str, text: str) -> TransportHost | None:
        username = password = None
        if "@" in text:
            cred, text = text.rsplit("@", 1)
            if ":" in cred:
                username, password = cred.split(":", 1)
                password = parse.unquote(password)
            else:
                username = cred
            username = parse.unquote(username)
        port_text = None
        if text.startswith("["):
            end = text.find("]")
            if end < 0:
                raise InvalidTransportURL(_redact_raw(url), f"Invalid IPv6 address {text!r}: missing ']'")
            hostname = text[1:end]
            tail = text[end + 1:]
            if tail and not tail.startswith(":"):
                raise InvalidTransportURL(_redact_raw(url), f"Unexpected {tail!r} after IPv6 address")
            port_text = tail[1:] if tail else None
        elif ":" in text:
            hostname, port_text = text.split(":", 1)
        else:
            hostname = text
        port = None
        if port_text:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise InvalidTransportURL(_redact_raw(url), f"Invalid port {port_text!r} for host {hostname!r}")
            port = int(port_text)
        if not hostname and username is None and port is None:
            return None
        return TransportHost(hostname or None, port, username, password)


def _redact_raw(url: str) -> str:
    """Hide passwords in a URL string that may not even parse."""
    out = []
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    for part in netloc.split(","):
        if "@" in part:
            cred, host = part.rsplit("@", 1)
            user = cred.split(":", 1)[0]
            part = f"{user}:***@{host}" if ":" in cred else part
        out.append(part)
    return f"{scheme}://{','.join(out)}{slash}{tail}"
