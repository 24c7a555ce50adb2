"""The oslo wire format: our encoding against oslo.messaging's own code."""
import datetime
import json

import pytest
from oslo_messaging._drivers import common as oslo_common
from oslo_messaging._drivers import impl_kafka

from notify_transport.drivers import envelope
from notify_transport.exceptions import DecodeError

MSG = {"message_id": "m1", "publisher_id": "p", "event_type": "e.t", "priority": "INFO",
       "payload": {"k": [1, 2], "u": "é"}, "timestamp": "2026-01-01 00:00:00.000001"}


def test_v2_readable_by_oslo_kafka_unpack():
    raw = envelope.encode(MSG, {"user": "u"}, 2.0)
    ctxt, msg = impl_kafka.unpack_message(raw)
    assert ctxt == {"user": "u"} and msg == MSG


def test_oslo_kafka_pack_readable_here():
    packed = impl_kafka.pack_message({"user": "u"}, dict(MSG))
    raw = json.dumps(packed).encode()
    assert envelope.decode(raw) == ({"user": "u"}, MSG)


def test_v1_plain_and_prefixed_context():
    raw = envelope.encode(MSG, {"user": "u", "tenant": "t"}, 1.0, envelope.CONTEXT_PREFIXED)
    body = json.loads(raw)
    assert "oslo.version" not in body and body["_context_user"] == "u"
    assert envelope.decode(raw) == ({"user": "u", "tenant": "t"}, MSG)
    assert oslo_common.deserialize_msg(body)["_context_tenant"] == "t"


def test_non_json_types_become_primitives():
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 6)
    _, msg = envelope.decode(envelope.encode({"payload": {"when": when, "s": {1}}}, {}))
    assert msg["payload"] == {"when": "2026-01-02T03:04:05.000006", "s": [1]}


@pytest.mark.parametrize("raw", [
    b"not json", b"\xff\xfe", b"[1,2]", b'"str"', b'{"oslo.version": "3.0", "oslo.message": "{}"}',
    b'{"oslo.version": "2.0", "oslo.message": "nope"}', b'{"oslo.version": "2.0", "oslo.message": "[]"}',
    b'{"_context": 5, "event_type": "a", "priority": "INFO"}',
])
def test_garbage_raises_decode_error(raw):
    with pytest.raises(DecodeError):
        envelope.decode(raw)


def test_decode_notification_requires_event_type_and_priority():
    with pytest.raises(DecodeError, match="event_type"):
        envelope.decode_notification(envelope.encode({"priority": "INFO"}, {}))
    assert envelope.decode_notification(envelope.encode(MSG, {}))[1] == MSG


def test_standard_keys_take_the_short_path_and_others_are_still_scanned():
    # only the notifier's keys: no scan needed, the dict context is returned as is
    ctxt = {"user": "u"}
    assert envelope.split_context(dict(MSG, _context=ctxt)) == (ctxt, MSG)
    assert envelope.split_context(dict(MSG)) == ({}, MSG)
    # both styles in one message (a relay that added prefixed keys): merged, original untouched
    body = dict(MSG, _context=ctxt, _context_tenant="t", extra=1)
    got_ctxt, got_msg = envelope.split_context(body)
    assert got_ctxt == {"user": "u", "tenant": "t"} and ctxt == {"user": "u"}
    assert got_msg == dict(MSG, extra=1)


@pytest.mark.parametrize("bad", [{"event_type": 1, "priority": "INFO"}, {"event_type": "e"},
                                 {"event_type": "e", "priority": None}])
def test_decode_notification_names_what_is_wrong(bad):
    with pytest.raises(DecodeError, match="not a notification"):
        envelope.decode_notification(envelope.encode(bad, {}))


@pytest.mark.parametrize("ctxt_value, extra", [({"user": "u"}, {}), (None, {}), ({}, {"_context_tenant": "t"}),
                                               ({"user": "u"}, {"custom": 1})])
def test_the_common_case_shortcut_decodes_like_the_general_path(ctxt_value, extra):
    inner = dict(MSG, **extra)
    if ctxt_value is not None:
        inner["_context"] = ctxt_value
    raw = json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)}).encode()
    assert envelope.decode_notification(raw) == envelope.split_context(envelope.unwrap(raw))


@pytest.mark.parametrize("inner", ['{"_context": 5, "event_type": "e", "priority": "INFO"}',
                                   '{"_context": {}, "event_type": 1, "priority": "INFO"}',
                                   '["not", "an", "object"]', "{broken"])
def test_the_shortcut_leaves_bad_envelopes_to_the_general_path(inner):
    raw = json.dumps({"oslo.version": "2.0", "oslo.message": inner}).encode()
    with pytest.raises(DecodeError):
        envelope.decode_notification(raw)
