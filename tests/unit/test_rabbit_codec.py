"""Bodies and properties as kombu writes and reads them (oslo's rabbit driver uses kombu)."""
import json

import pytest

from notify_transport.drivers.rabbit.codec import BodyCodec
from notify_transport.exceptions import ConfigurationError, DecodeError

kombu_compression = pytest.importorskip("kombu.compression")
rpc_common = pytest.importorskip("oslo_messaging._drivers.common")


def test_properties_match_what_kombu_sends():
    props = BodyCodec().properties()
    assert (props.content_type, props.content_encoding, props.delivery_mode, props.priority) == \
        ("application/json", "utf-8", 2, 0)
    assert props.expiration is None
    assert BodyCodec().properties(2.5).expiration == "2500"  # kombu: str(int(seconds * 1000))


def test_body_is_the_oslo_envelope_with_prefixed_context():
    body = BodyCodec().encode({"method": "m", "args": {"a": 1}}, {"user": "u", "roles": ["x"]})
    envelope = json.loads(body)
    inner = rpc_common.deserialize_msg(envelope)  # oslo's own decoder
    assert inner == {"method": "m", "args": {"a": 1}, "_context_user": "u", "_context_roles": ["x"]}


def test_version_1_has_no_envelope():
    body = BodyCodec().encode({"event_type": "e", "priority": "INFO"}, {"u": 1}, version=1.0)
    assert json.loads(body) == {"event_type": "e", "priority": "INFO", "_context_u": 1}


def test_decode_reads_oslo_serialized_messages():
    envelope = rpc_common.serialize_msg({"method": "x", "_msg_id": "abc"})
    assert BodyCodec().decode(json.dumps(envelope).encode(), None) == {"method": "x", "_msg_id": "abc"}


@pytest.mark.parametrize("name, kombu_name", [("gzip", "gzip"), ("bz2", "bzip2"), ("lzma", "lzma")])
def test_compression_interoperates_with_kombu(name, kombu_name):
    codec = BodyCodec(name)
    props = codec.properties()
    body = codec.encode({"method": "m"}, {})
    # what kombu's consumer does with it
    assert json.loads(kombu_compression.decompress(body, props.headers["compression"]))["oslo.version"] == "2.0"
    # and what kombu's producer would send
    raw, content_type = kombu_compression.compress(json.dumps({"a": 1}).encode(), kombu_name)
    props.headers = {"compression": content_type}
    assert codec.decode(raw, props) == {"a": 1}


def test_bad_bodies_raise_decode_error():
    codec = BodyCodec()
    with pytest.raises(DecodeError):
        codec.decode(b"\xff\xfe", None)
    props = codec.properties()
    props.headers = {"compression": "application/x-unknown"}
    with pytest.raises(DecodeError, match="compression"):
        codec.decode(b"{}", props)
    props.headers = {"compression": "application/x-gzip"}
    with pytest.raises(DecodeError, match="decompress"):
        codec.decode(b"not zlib", props)


def test_unknown_compression_option_is_refused():
    with pytest.raises(ConfigurationError, match="snappy"):
        BodyCodec("snappy")
