"""The redacted context shortcut gives exactly what oslo.context's own methods give."""
from __future__ import annotations

import json

import pytest
from oslo_context import context as oslo_context

from notify_transport.notify import redaction
from notify_transport.notify.notifier import sanitize_context


def contexts():
    yield oslo_context.RequestContext(overwrite=False)
    yield oslo_context.RequestContext(
        auth_token="secret-token", user_id="u1", project_id="p1", domain_id="d1",
        user_domain_id="ud", project_domain_id="pd", is_admin=True, read_only=True,
        show_deleted=True, request_id="req-x", resource_uuid="r1", roles=["admin"],
        service_token="svc-secret", service_roles=["service"], global_request_id="req-g",
        system_scope="all", is_admin_project=False, overwrite=False)
    yield oslo_context.RequestContext(user_id=None, project_id="p", roles=[], is_admin=None,
                                      request_id="", overwrite=False)


@pytest.mark.parametrize("ctxt", list(contexts()))
def test_same_dict_same_order_same_json_as_redacted_copy(ctxt):
    expected = ctxt.redacted_copy().to_dict()
    got = redaction.redacted_dict(ctxt)
    assert got is not None
    if not ctxt.request_id:  # redacted_copy() makes up a new id, so does the shortcut
        assert got.pop("request_id").startswith("req-")
        expected.pop("request_id")
    assert json.dumps(got) == json.dumps(expected)
    assert got["auth_token"] is None and "secret" not in json.dumps(got)


def test_subclasses_and_other_objects_use_their_own_methods():
    class ServiceContext(oslo_context.RequestContext):
        def to_dict(self):
            return dict(super().to_dict(), service="extra")

    ctxt = ServiceContext(user_id="u", auth_token="tok", overwrite=False)
    assert redaction.redacted_dict(ctxt) is None
    sent = sanitize_context(ctxt)
    assert sent.to_dict()["service"] == "extra" and sent.to_dict()["auth_token"] is None
    assert redaction.redacted_dict({"user": "u"}) is None


def test_the_current_context_of_the_thread_is_left_alone():
    ctxt = oslo_context.RequestContext(user_id="u", auth_token="tok")  # becomes current
    redaction._check.cache_clear()  # the one-time check runs again here
    assert sanitize_context(ctxt)["user"] == "u"
    assert oslo_context.get_current() is ctxt


def test_no_current_context_stays_none():
    """The check's probe contexts never become the caller's current context."""
    import threading

    seen = []

    def fresh_thread():
        redaction._check.cache_clear()
        assert redaction._check() is not False
        seen.append(oslo_context.get_current())

    worker = threading.Thread(target=fresh_thread)
    worker.start()
    worker.join()
    assert seen == [None]


def test_a_different_oslo_context_disables_the_shortcut(monkeypatch):
    original = oslo_context.RequestContext.to_dict
    monkeypatch.setattr(oslo_context.RequestContext, "to_dict",
                        lambda self: dict(original(self), added_in_a_new_version=1))
    redaction._check.cache_clear()
    try:
        ctxt = oslo_context.RequestContext(user_id="u", overwrite=False)
        assert redaction.redacted_dict(ctxt) is None
        assert sanitize_context(ctxt).to_dict()["added_in_a_new_version"] == 1
    finally:
        monkeypatch.undo()
        redaction._check.cache_clear()
    assert redaction.redacted_dict(oslo_context.RequestContext(overwrite=False)) is not None


class _OwnContext(oslo_context.RequestContext):
    """A subclass: its own redacted_copy() decides what goes on the bus."""

    def redacted_copy(self, **kwargs):
        copy = super().redacted_copy(**kwargs)
        copy.user_id = "masked"
        return copy


def test_a_notifier_sends_the_redacted_dict_of_each_context_it_is_given(conf):
    import notify_transport as nt

    with nt.get_notification_transport(conf, "fake://") as transport:
        notifier = nt.Notifier(transport, "host-1", driver="test")
        for ctxt in list(contexts()) + [_OwnContext(user_id="u2", auth_token="tok", overwrite=False)]:
            notifier.info(ctxt, "compute.start", {})
            sent = notifier.sent[-1][0]
            expected = ctxt.redacted_copy().to_dict()
            if not ctxt.request_id:
                assert sent.pop("request_id").startswith("req-")
                expected.pop("request_id")
            assert json.dumps(sent) == json.dumps(expected)
            assert sent["auth_token"] is None
        assert sent["user"] == "masked"
