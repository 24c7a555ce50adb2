"""Property-based tests of the wire decoder: any bytes are a notification or undecodable.

Bounded (small ``max_examples``, no deadline) so that they stay fast in CI.
"""
import json

from hypothesis import HealthCheck, given, settings, strategies as st

from notify_transport.drivers import envelope
from notify_transport.exceptions import DecodeError

BOUNDED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# integers within 64 bits: orjson (the fast decoder) reads a larger one as a float, a known
# precision loss the stdlib parser would avoid at twice the decoding cost on every message
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children,
                                                                        max_size=4),
    max_leaves=20)


def classify(raw):
    """'notification' or 'undecodable'; anything else raised fails the test."""
    try:
        ctxt, message = envelope.decode_notification(raw)
    except DecodeError as exc:
        assert len(str(exc)) < 1000  # a reason, not the record
        return "undecodable"
    assert isinstance(ctxt, dict) and isinstance(message, dict)
    assert isinstance(message["event_type"], str) and isinstance(message["priority"], str)
    return "notification"


@BOUNDED
@given(st.binary(max_size=2000))
def test_any_bytes_are_classified(raw):
    classify(raw)


def _nest(depth: int, opener: str) -> str:
    closer = {"[": "]", "{\"a\":": "}"}[opener]
    return opener * depth + "1" + closer * depth


@BOUNDED
@given(depth=st.integers(min_value=1, max_value=6000), where=st.sampled_from(
    ["bare", "payload", "context", "version", "inner"]), opener=st.sampled_from(["[", "{\"a\":"]))
def test_nesting_at_any_depth_and_place_is_classified(depth, where, opener):
    nested = _nest(depth, opener)
    message = '{"event_type": "e", "priority": "INFO", "payload": %s}'
    if where == "bare":
        raw = nested
    elif where == "payload":
        raw = json.dumps({"oslo.version": "2.0", "oslo.message": message % nested})
    elif where == "context":
        raw = '{"event_type": "e", "priority": "INFO", "_context": %s}' % nested
    elif where == "version":
        raw = '{"oslo.version": %s, "oslo.message": "{}"}' % nested
    else:
        raw = '{"oslo.version": "2.0", "oslo.message": %s}' % nested
    outcome = classify(raw.encode())
    if depth <= 100 and where == "payload":
        assert outcome == "notification"


@BOUNDED
@given(payload=json_values, ctxt=st.dictionaries(st.text(max_size=8), json_values, max_size=3),
       version=st.sampled_from([1.0, 2.0]))
def test_what_we_encode_decodes_back(payload, ctxt, version):
    message = {"event_type": "e", "priority": "INFO", "payload": payload}
    raw = envelope.encode(message, ctxt, version)
    got_ctxt, got = envelope.decode_notification(raw)
    assert got["payload"] == json.loads(envelope.dumps(payload)) and got_ctxt == json.loads(
        envelope.dumps(ctxt))


@BOUNDED
@given(payload=json_values, ctxt=st.one_of(st.none(), st.dictionaries(st.text(max_size=8), json_values,
                                                                    max_size=3)),
       version=st.sampled_from([1.0, 2.0, "2.0", 2.1]),
       style=st.sampled_from([envelope.CONTEXT_DICT, envelope.CONTEXT_PREFIXED]))
def test_a_bound_encoder_writes_what_encode_writes(payload, ctxt, version, style):
    message = {"message_id": "m", "event_type": "e", "priority": "INFO", "payload": payload}
    assert envelope.encoder(version, style)(message, ctxt) == envelope.encode(message, ctxt, version, style)


@BOUNDED
@given(prefix=st.binary(max_size=30), suffix=st.binary(max_size=30), payload=json_values)
def test_corrupted_envelopes_are_classified(prefix, suffix, payload):
    raw = envelope.encode({"event_type": "e", "priority": "INFO", "payload": payload}, {})
    classify(prefix + raw + suffix)
    classify(raw[: len(raw) // 2])
    classify(raw.replace(b'"', b"\xff", 1))
