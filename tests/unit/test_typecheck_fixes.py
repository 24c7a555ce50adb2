"""Behaviour at the edges that the type check made explicit."""
import json

import pytest

from notify_transport.drivers.envelope import decode_notification
from notify_transport.drivers.kafka.naming import SendTopics
from notify_transport.drivers.remote_errors import deserialize_remote_exception
from notify_transport.exceptions import DecodeError, InvalidTarget
from notify_transport.rpc import RemoteError


def test_a_tombstone_value_is_a_decode_error():
    with pytest.raises(DecodeError, match="NoneType"):
        decode_notification(None)


@pytest.mark.parametrize("topic", [None, ""])
def test_sending_without_a_topic_is_an_invalid_target(topic):
    topics = SendTopics(None)
    with pytest.raises(InvalidTarget, match="A topic is required"):
        topics(topic)
    assert topics("notifications") == "notifications"


def test_a_remote_failure_without_a_class_name_stays_a_remote_error():
    failure = json.dumps({"class": None, "module": "builtins", "message": "lost", "tb": []})
    error = deserialize_remote_exception(failure, [])
    assert isinstance(error, RemoteError)
    assert error.value == "lost"
