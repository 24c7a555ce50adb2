"""The oslo.messaging wire format, shared by every driver.

Version 2.0 (``messagingv2``) wraps the JSON message in an envelope::

    {"oslo.version": "2.0", "oslo.message": "<the message as a JSON string>"}

Version 1.0 (``messaging``) sends the message JSON as is. The request context
travels inside the message, either as one ``_context`` dict (oslo's Kafka
driver) or as ``_context_<key>`` entries (oslo's AMQP drivers). Decoding
accepts every combination, since both are on the wire in real deployments.
"""
from __future__ import annotations

import datetime
import decimal
import enum
import functools
import json
import uuid
from typing import Any, Callable

from notify_transport.exceptions import DecodeError

try:  # a C JSON library, 5-8x faster than the standard one on notification-sized messages
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency; this keeps a broken install working
    orjson = None  # type: ignore[assignment]

VERSION_KEY = "oslo.version"
MESSAGE_KEY = "oslo.message"
ENVELOPE_VERSION = "2.0"
CONTEXT_KEY = "_context"
CONTEXT_PREFIX = "_context_"
_PREFIX_LEN = len(CONTEXT_PREFIX)

#: context styles
CONTEXT_DICT = "dict"
CONTEXT_PREFIXED = "prefixed"

def to_primitive(value: Any) -> Any:
    """JSON ``default`` hook: turn common non-JSON types into primitives as oslo does."""
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    for attr in ("to_dict", "_asdict"):
        if callable(getattr(value, attr, None)):
            return getattr(value, attr)()
    if hasattr(value, "items"):
        return dict(value.items())
    if hasattr(value, "__iter__"):
        return list(value)
    return str(value)


_dumps = json.JSONEncoder(default=to_primitive, ensure_ascii=False).encode


def dumps(obj: Any) -> str:
    """Serialize to JSON, converting datetimes, sets and objects like oslo's jsonutils."""
    return _dumps(obj)


if orjson is not None:
    # Datetimes and dataclasses go through to_primitive as with the standard
    # encoder (orjson would format them its own way); anything orjson refuses
    # (integers beyond 64 bits, non-string keys, ...) is encoded by the standard
    # library instead, so the output means the same thing either way.
    _ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
    _orjson_dumps = orjson.dumps
    _orjson_loads = orjson.loads
    _OrjsonEncodeError = orjson.JSONEncodeError
    _OrjsonDecodeError = orjson.JSONDecodeError

    def _dumps_bytes(obj: Any) -> bytes:
        try:
            return _orjson_dumps(obj, default=to_primitive, option=_ORJSON_OPTIONS)
        except _OrjsonEncodeError:
            return _dumps(obj).encode("utf-8")

    def _loads(raw: bytes | bytearray | str) -> Any:
        try:
            return _orjson_loads(raw)
        except _OrjsonDecodeError:
            # NaN/Infinity, lone surrogates, huge integers: what the standard
            # parser accepts is accepted, what it refuses raises its own error
            return json.loads(raw)
else:  # pragma: no cover
    def _dumps_bytes(obj: Any) -> bytes:
        return _dumps(obj).encode("utf-8")

    _loads = json.loads

#: The start of a 2.0 envelope, spelled as oslo.messaging's json.dumps spells it.
_ENVELOPE_HEAD = f'{{"{VERSION_KEY}": "{ENVELOPE_VERSION}", "{MESSAGE_KEY}": '.encode()


def _enveloped(version: float | str) -> bool:
    return version == 2.0 or float(version) >= 2.0


def encode(message: dict, ctxt: dict | None, version: float | str = 2.0,
           context_style: str = CONTEXT_DICT) -> bytes:
    """Return the wire bytes of ``message`` with ``ctxt`` packed inside it."""
    msg = dict(message)
    if context_style == CONTEXT_DICT:
        msg[CONTEXT_KEY] = ctxt or {}
    elif ctxt:
        for key, value in ctxt.items():
            msg[CONTEXT_PREFIX + key] = value
    inner = _dumps_bytes(msg)
    if _enveloped(version):
        # the message JSON travels as one JSON string inside the envelope
        return b"".join((_ENVELOPE_HEAD, _dumps_bytes(inner.decode("utf-8")), b"}"))
    return inner


def encoder(version: float | str = 2.0,
            context_style: str = CONTEXT_DICT) -> Callable[[dict, dict | None], bytes]:
    """:func:`encode` with its version and context style bound, for a sender's hot path.

    The common case (a 2.0 envelope around a ``_context`` dict) gets a function of its
    own: a ``functools.partial`` with keywords builds a keyword dict on every call, a
    third of a microsecond per notification, and the outer encoding of a string never
    needs the fallback that the message's own encoding may.
    """
    if context_style != CONTEXT_DICT or not _enveloped(version) or orjson is None:
        return functools.partial(encode, version=version, context_style=context_style)
    head, dumps_str = _ENVELOPE_HEAD, _orjson_dumps

    def encode_v2(message: dict, ctxt: dict | None) -> bytes:
        msg = dict(message)
        msg[CONTEXT_KEY] = ctxt or {}
        # orjson's output decodes to a str without lone surrogates: orjson accepts it as is
        return b"".join((head, dumps_str(_dumps_bytes(msg).decode("utf-8")), b"}"))
    return encode_v2


#: Why a record nested too deeply is refused (the standard parser stops at
#: Python's recursion limit, orjson at 1024 levels).
TOO_DEEP = "nested too deeply to decode"


def _parse(raw: bytes | bytearray | str, what: str) -> Any:
    """JSON of ``raw``; any failure to parse it (deep nesting included) is a DecodeError."""
    try:
        return _loads(raw)
    except RecursionError:
        raise DecodeError(f"{what}: {TOO_DEEP}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise DecodeError(f"{what}: {exc}") from None


def unwrap(raw: bytes | str | dict | None) -> dict:
    """Parse wire bytes (or an already parsed body) and remove the 2.0 envelope."""
    body = _parse(raw, "not JSON") if isinstance(raw, (bytes, bytearray, str)) else raw
    if type(body) is not dict and not isinstance(body, dict):
        raise DecodeError(f"expected a JSON object, got {type(body).__name__}")
    if MESSAGE_KEY in body and VERSION_KEY in body:
        version = body[VERSION_KEY]
        if version != ENVELOPE_VERSION and (
                str(version).split(".", 1)[0] != ENVELOPE_VERSION.split(".", 1)[0]):
            raise DecodeError(f"unsupported envelope version {_short(version)}")
        inner = body[MESSAGE_KEY]
        body = _parse(inner, "envelope holds invalid JSON") if isinstance(inner, (str, bytes)) \
            else inner
        if type(body) is not dict and not isinstance(body, dict):
            raise DecodeError(f"envelope holds a {type(body).__name__}, not an object")
    return body


#: The keys a notifier puts in a message: a body with no other key holds no
#: ``_context_<key>`` entries, which spares a scan of every key per message.
_NOTIFICATION_KEYS = frozenset({"message_id", "publisher_id", "event_type", "priority",
                                "payload", "timestamp", CONTEXT_KEY})


def split_context(body: dict) -> tuple[dict, dict]:
    """Separate the request context from the message, for both context styles."""
    ctxt = body.pop(CONTEXT_KEY, None)
    if ctxt is not None and type(ctxt) is not dict and not isinstance(ctxt, dict):
        raise DecodeError(f"_context is a {type(ctxt).__name__}, not an object")
    if body.keys() <= _NOTIFICATION_KEYS:
        return (ctxt if ctxt is not None else {}), body
    prefixed = [k for k in body if k.startswith(CONTEXT_PREFIX)]
    if not prefixed:
        return (ctxt if ctxt is not None else {}), body
    ctxt = dict(ctxt) if ctxt else {}   # a copy: never add keys to a dict the caller holds
    for key in prefixed:
        ctxt[key[_PREFIX_LEN:]] = body.pop(key)
    return ctxt, body


def decode(raw: bytes | str | dict) -> tuple[dict, dict]:
    """Return ``(ctxt, message)`` from wire bytes; raise :class:`DecodeError` if invalid."""
    try:
        return split_context(unwrap(raw))
    except DecodeError:
        raise
    except (RecursionError, ValueError, TypeError) as exc:
        raise DecodeError(_unexpected(exc)) from None


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: error texts never carry a whole record."""
    try:
        text = repr(value)
    except RecursionError:
        return f"<{type(value).__name__} nested too deeply>"
    return text if len(text) <= limit else text[:limit] + "..."


def _unexpected(exc: BaseException) -> str:
    """The reason given for a record the decoder choked on (e.g. a deeply nested version field)."""
    if isinstance(exc, RecursionError):
        return TOO_DEEP
    return f"cannot decode: {type(exc).__name__}: {str(exc)[:200]}"


def decode_notification(raw: bytes | str | dict | None) -> tuple[dict, dict]:
    """Like :func:`decode`, and check the message looks like a notification.

    Whatever ``raw`` holds, the outcome is a notification or a
    :class:`DecodeError`: bytes off the wire are data, and no content (deep
    nesting, odd types) may make a consumer loop raise anything else.
    """
    try:
        return _decode_notification(raw)
    except DecodeError:
        raise
    except (RecursionError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise DecodeError(_unexpected(exc)) from None


def _decode_notification(raw: bytes | str | dict | None) -> tuple[dict, dict]:
    if type(raw) is bytes and orjson is not None:
        # the common case in one go: a 2.0 envelope around a notification with a
        # ``_context`` dict and nothing else; anything unusual takes the general path
        try:
            body = _orjson_loads(raw)
            if type(body) is dict and body.get(VERSION_KEY) == ENVELOPE_VERSION:
                message = _orjson_loads(body[MESSAGE_KEY])
                if type(message) is dict and message.keys() <= _NOTIFICATION_KEYS:
                    ctxt = message.pop(CONTEXT_KEY, None)
                    if ((ctxt is None or type(ctxt) is dict) and type(message.get("event_type")) is str
                            and type(message.get("priority")) is str):
                        return (ctxt if ctxt is not None else {}), message
        except (_OrjsonDecodeError, KeyError, TypeError):
            pass
    ctxt, message = split_context(unwrap(raw))
    if type(message.get("event_type")) is not str or type(message.get("priority")) is not str:
        missing = [k for k in ("event_type", "priority") if not isinstance(message.get(k), str)]
        if missing:
            raise DecodeError(f"not a notification: missing or non-string {', '.join(missing)}")
    return ctxt, message
