"""What is a secret, and masking it: one rule for URLs, client properties and contexts.

A value is secret when its name says so: ``oslo_utils.strutils`` would mask it,
or it names what transports add (doc/source/deployment.rst, "What counts as a
secret"). Every user calls :func:`is_secret`.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from oslo_utils import strutils

#: what a masked secret prints as (oslo_utils.strutils' default too)
MASK = "***"

_MORE_SECRET_WORDS = ("passwd", "pwd", "credential", "private", "oauthbearer_config")
_KEY_WORDS = frozenset({"key", "apikey", "accesskey"})
#: words after ``key`` that make the name a reference to a key, not the key itself
_KEY_REFERENCE_WORDS = frozenset({"file", "location", "path", "id", "name", "store", "size", "type"})
_SEPARATORS = re.compile(r"[^a-z0-9]+")
#: For an engine that matches names with a pattern instead of calling is_secret (Spark's
#: redaction of its conf and data source options): the words above, what oslo_utils masks
#: most often, and names whose values carry credentials inside them (a transport URL, JAAS).
_PATTERN_WORDS = ("secret", "password", "token", "access[._]?key", "api[._]?key", "keystore[._]key",
                  "key[._]pem", "url", "jaas")


def name_pattern() -> str:
    """A case-insensitive regular expression (Java and Python syntax) matching the names
    whose values must be hidden, for tools that take a pattern rather than call :func:`is_secret`."""
    return "(?i)" + "|".join(_PATTERN_WORDS + tuple(w.replace("_", "[._]") for w in _MORE_SECRET_WORDS))


@functools.lru_cache(maxsize=4096)
def is_secret(name: str) -> bool:
    """True when the value named ``name`` must never be shown (a URL query key, a
    librdkafka property, a context or payload key)."""
    if not isinstance(name, str):
        return False
    if strutils.mask_dict_password({name: None})[name] is not None:
        return True  # on oslo_utils' list: it masked the (otherwise untouched) None
    norm = _SEPARATORS.sub("_", name.lower())
    if any(word in norm for word in _MORE_SECRET_WORDS):
        return True
    words = norm.split("_")
    return any(word in _KEY_WORDS and _KEY_REFERENCE_WORDS.isdisjoint(words[i + 1:])
               for i, word in enumerate(words))


def mask_value(name: str, value: str) -> str:
    """``value`` with secrets masked: all of it for a secret ``name``, else any embedded
    ``prop:secret`` / ``prop=secret`` pair (``librdkafka_config=sasl.password:x``)."""
    if is_secret(name):
        return MASK
    if ":" not in value and "=" not in value:
        return value
    parts = []
    for item in value.split(","):
        prop, sep, _val = item.partition(":") if ":" in item else item.partition("=")
        parts.append(f"{prop}{sep}{MASK}" if sep and is_secret(prop) else item)
    return ",".join(parts)


def mask(value: Any) -> Any:
    """A copy of ``value`` safe to log, at any depth: the values of secret keys as
    ``***``, and strings through ``strutils.mask_password`` (``"password=x"`` in text)."""
    if isinstance(value, Mapping):
        return {k: MASK if isinstance(k, str) and is_secret(k) else mask(v) for k, v in value.items()}
    if isinstance(value, str):
        return strutils.mask_password(value, secret=MASK)
    if isinstance(value, (list, tuple)):
        return [mask(v) for v in value]
    return value


def mask_properties(conf: Mapping[str, Any]) -> dict[str, Any]:
    """Client properties safe to log: secret values as ``***``, callbacks left out."""
    return {k: (MASK if v and is_secret(k) else v) for k, v in conf.items() if not callable(v)}


def without_secrets(ctxt: dict[str, Any]) -> dict[str, Any]:
    """A context dict without its secret keys (``auth_token``, ``service_password``...);
    ``ctxt`` itself when it has none, so the common case copies nothing."""
    secret = _secret_keys(tuple(ctxt))
    if not secret:
        return ctxt
    return {k: v for k, v in ctxt.items() if k not in secret}


@functools.lru_cache(maxsize=256)
def _secret_keys(keys: tuple[Any, ...]) -> frozenset[Any]:
    """The secret ones of a context's keys (a service sends the same few key sets)."""
    return frozenset(filter(is_secret, keys))
