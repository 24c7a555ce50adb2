"""The path of a notification from ``Notifier.info`` to the Kafka client: short, and each piece of
per-notification work done once (a stand-in client records what reaches it)."""
from __future__ import annotations

import sys

import pytest

import notify_transport as nt
from kafka_fake_producer import FakeClient, install
from notify_transport.drivers import envelope
from notify_transport.notify.notifier import Notifier

#: Python frames from Notifier.info (included) to the client's produce() (not included)
MOST_FRAMES = 4


class _StackRecorder(FakeClient):
    """Counts the frames between the caller of produce() and Notifier.info."""

    stacks: list[list[str]] = []

    def produce(self, *args, **kwargs):
        frame, names = sys._getframe(1), []
        while frame is not None:
            names.append(frame.f_code.co_qualname)
            if frame.f_code is Notifier.info.__code__:
                break
            frame = frame.f_back
        type(self).stacks.append(names)
        return super().produce(*args, **kwargs)


@pytest.fixture
def transport(conf, monkeypatch):
    made = install(monkeypatch, _StackRecorder)
    _StackRecorder.stacks = []
    with nt.get_notification_transport(conf, "kafka://127.0.0.1:9/") as transport:
        yield transport, made


def test_notifier_info_reaches_the_client_within_four_frames(transport):
    transport, made = transport
    notifier = nt.Notifier(transport, "host-1", driver="messagingv2", topics=["compute"])
    notifier.info({"request_id": "req-1"}, "compute.start", {"n": 1})
    notifier.prepare(publisher_id="host-2").info({}, "compute.stop", {"n": 2})
    assert len(_StackRecorder.stacks) == 2
    for names in _StackRecorder.stacks:
        assert names[-1] == "Notifier.info" and len(names) <= MOST_FRAMES, names
    for client in made:
        client.confirm(len(client.held))


def test_each_notification_is_encoded_once_with_its_context_and_key(transport, monkeypatch):
    transport, made = transport
    encoded = []
    real = envelope.encoder

    def counting_encoder(version, context_style):
        encode = real(version, context_style)

        def counting(message, ctxt):
            encoded.append((message["message_id"], dict(ctxt)))
            return encode(message, ctxt)
        return counting
    monkeypatch.setattr(envelope, "encoder", counting_encoder)
    notifier = nt.Notifier(transport, "host-1", driver="messagingv2", topics=["compute", "audit"])
    notifier.info({"request_id": "req-1", "auth_token": "secret"}, "compute.start", {"n": 1})
    # one notification, two topics: encoded once per topic, the secret dropped before
    assert [ctxt for _, ctxt in encoded] == [{"request_id": "req-1"}] * 2
    held = [m for client in made for m in client.held]
    assert [m.topic() for m in held] == ["compute.info", "audit.info"]
    assert {m.key() for m in held} == {"host-1"}
    decoded = [envelope.decode_notification(m.value()) for m in held]
    assert decoded[0] == decoded[1] and decoded[0][1]["payload"] == {"n": 1}
    for client in made:
        client.confirm(len(client.held))
