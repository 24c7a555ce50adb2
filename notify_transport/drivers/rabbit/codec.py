"""Message bodies and AMQP properties as oslo.messaging's rabbit driver (kombu) writes them.

kombu decodes a body only when the content type says JSON, so the properties
are part of the wire contract; a call's ``expiration`` keeps an unanswered
request from outliving its caller; ``kombu_compression`` names the codec in
the ``compression`` header.
"""
from __future__ import annotations

import bz2
import lzma
import zlib
from typing import Any, Callable

import pika

from notify_transport.drivers import envelope
from notify_transport.exceptions import ConfigurationError, DecodeError

CONTENT_TYPE = "application/json"
CONTENT_ENCODING = "utf-8"

_COMPRESSORS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": ("application/x-gzip", zlib.compress),
    "zlib": ("application/x-gzip", zlib.compress),
    "bz2": ("application/x-bz2", bz2.compress),
    "bzip2": ("application/x-bz2", bz2.compress),
    "bzip": ("application/x-bz2", bz2.compress),
    "lzma": ("application/x-lzma", lzma.compress),
    "xz": ("application/x-lzma", lzma.compress),
}
_DECOMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "application/x-gzip": zlib.decompress,
    "application/x-bz2": bz2.decompress,
    "application/x-lzma": lzma.decompress,
}


def check_compression(name: str | None) -> None:
    """Raise ConfigurationError for a ``kombu_compression`` value we cannot write."""
    if name and name not in _COMPRESSORS:
        raise ConfigurationError(f"Unsupported kombu_compression {name!r}; supported: "
                                 f"{', '.join(sorted(_COMPRESSORS))}")


class BodyCodec:
    """Encodes outgoing bodies and properties; decodes incoming ones."""

    def __init__(self, compression: str | None = None) -> None:
        check_compression(compression)
        self._compress = _COMPRESSORS[compression] if compression else None

    def properties(self, expiration_s: float | None = None) -> pika.BasicProperties:
        headers: dict[str, Any] = {}
        if self._compress is not None:
            headers["compression"] = self._compress[0]
        expiration = None
        if expiration_s is not None:
            expiration = str(max(int(expiration_s * 1000), 0))
        return pika.BasicProperties(content_type=CONTENT_TYPE, content_encoding=CONTENT_ENCODING,
                                    delivery_mode=2, priority=0, headers=headers,
                                    expiration=expiration)

    def encode(self, message: dict, ctxt: dict | None, version: float = 2.0) -> bytes:
        """The wire body: oslo envelope, context as ``_context_<key>`` entries."""
        body = envelope.encode(message, ctxt, version, context_style=envelope.CONTEXT_PREFIXED)
        if self._compress is not None:
            body = self._compress[1](body)
        return body

    @staticmethod
    def payload(body: bytes, properties: pika.BasicProperties | None) -> bytes:
        """The body with any kombu compression removed."""
        headers = getattr(properties, "headers", None) or {}
        codec = headers.get("compression")
        if codec:
            decompress = _DECOMPRESSORS.get(codec)
            if decompress is None:
                raise DecodeError(f"unsupported compression {codec!r}")
            try:
                body = decompress(body)
            except Exception as exc:  # each codec has its own error class
                raise DecodeError(f"cannot decompress {codec}: {exc}") from None
        return body

    def decode(self, body: bytes, properties: pika.BasicProperties | None) -> dict:
        """The message dict with the 2.0 envelope removed (context still inside)."""
        return envelope.unwrap(self.payload(body, properties))
