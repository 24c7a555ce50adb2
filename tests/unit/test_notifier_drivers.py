"""Notifier drivers loaded through stevedore, as oslo.messaging loads them."""
import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest

import notify_transport as nt
from notify_transport.notify import drivers


@pytest.fixture
def transport(fake_transport):
    return fake_transport


def test_builtin_drivers_are_entry_points():
    from stevedore import extension
    names = {ext.name for ext in extension.ExtensionManager(drivers.NAMESPACE)}
    assert {"messagingv2", "messaging", "log", "test", "noop", "routing"} <= names


def test_test_driver_keeps_what_was_sent(transport):
    n = nt.Notifier(transport, "p", driver=["test", "noop"])
    n.info({"user": "u"}, "a.b", {"x": 1})
    assert isinstance(n.drivers[0], drivers.TestDriver) and isinstance(n.drivers[1], drivers.NoOpDriver)
    (ctxt, msg, prio), = n.sent
    assert ctxt == {"user": "u"} and msg["event_type"] == "a.b" and prio == "INFO"


def test_log_driver_uses_oslo_logger_names_and_masks_secrets(transport, caplog):
    n = nt.Notifier(transport, "p", driver="log")
    with caplog.at_level(logging.DEBUG, logger="oslo.messaging.notification"):
        n.error({}, "compute.boot", {"admin_password": "HUSH", "nested": [{"auth_token": "TOK"}], "ok": 1})
    (record,) = [r for r in caplog.records if r.name == "oslo.messaging.notification.compute.boot"]
    assert record.levelno == logging.ERROR
    assert "HUSH" not in record.getMessage() and "TOK" not in record.getMessage()
    assert json.loads(record.getMessage())["payload"]["ok"] == 1


def test_unknown_driver_lists_the_installed(transport):
    with pytest.raises(nt.ConfigurationError, match="installed: .*log.*noop"):
        nt.Notifier(transport, "p", driver="nosuch")


def test_routing_driver_follows_the_yaml_rules(transport, tmp_path):
    routes = tmp_path / "routing.yaml"
    routes.write_text(textwrap.dedent("""\
        group_1:
          test:
            accepted_events: [compute.instance.create.*, image.*]
            accepted_priorities: [info]
          log:
            accepted_priorities: [error, crit*]
        group_2:
          noop:
        """))
    transport.conf.register_opt(drivers.routing_config_opt, group="oslo_messaging_notifications")
    transport.conf.set_override("routing_config", str(routes), group="oslo_messaging_notifications")
    n = nt.Notifier(transport, "p", driver="routing")
    router = n.drivers[0]
    n.info({}, "compute.instance.create.end", {})
    n.info({}, "compute.instance.delete.end", {})
    n.error({}, "image.upload", {})
    n.warn({}, "image.upload", {})
    assert router.accepted_drivers("image.x", "info") == {"test", "noop"}
    assert router.accepted_drivers("other", "critical") == {"log", "noop"}
    test_driver = router._drivers["test"]
    assert [(m["event_type"], p) for _c, m, p in test_driver.sent] == [("compute.instance.create.end", "INFO")]


def test_routing_without_config_routes_nothing(transport):
    n = nt.Notifier(transport, "p", driver="routing")
    n.info({}, "a", {})
    assert n.drivers[0].accepted_drivers("a", "info") == set()


def test_a_third_party_driver_is_loaded_by_name(tmp_path):
    """A package registering a class under the entry point group is used by its name.

    In a fresh interpreter: stevedore caches a group's entry points per process.
    """
    (tmp_path / "thirdparty_notifier.py").write_text(textwrap.dedent("""\
        from notify_transport.notify.drivers import Driver
        SEEN = []
        class Audit(Driver):
            def notify(self, ctxt, msg, priority, retry):
                SEEN.append((self.topics, msg["event_type"], priority))
        """))
    dist = tmp_path / "thirdparty_notifier-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-notifier\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{drivers.NAMESPACE}]\naudit = thirdparty_notifier:Audit\n")
    script = textwrap.dedent("""\
        from oslo_config import cfg
        import notify_transport as nt, thirdparty_notifier
        conf = cfg.ConfigOpts(); conf([])
        n = nt.Notifier(nt.get_notification_transport(conf, "fake:///"), "p", driver="audit", topics=["t1"])
        n.sample({}, "e", {})
        print(thirdparty_notifier.SEEN)
        """)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[(['t1'], 'e', 'SAMPLE')]"


def test_notifier_module_has_no_driver_name_chain():
    import inspect
    from notify_transport.notify import notifier
    source = inspect.getsource(notifier)
    for name in ("messagingv2", "noop", '"log"', '"test"'):
        assert f'== {name}' not in source and f'== "{name}"' not in source


def test_a_broken_routing_config_fails_when_the_notifier_is_built(transport, tmp_path):
    routes = tmp_path / "routing.yaml"
    routes.write_text("- just\n- a list\n")
    transport.conf.register_opt(drivers.routing_config_opt, group="oslo_messaging_notifications")
    transport.conf.set_override("routing_config", str(routes), group="oslo_messaging_notifications")
    with pytest.raises(nt.ConfigurationError, match="expected a mapping of groups"):
        nt.Notifier(transport, "p", driver="routing")


def test_a_topic_the_driver_refuses_is_logged_at_each_notification_and_never_raised(conf, caplog):
    """A sender that cannot be made (a topic name the driver refuses) fails each notification
    alike: logged with its cause, never raised into the service, its traceback not growing."""
    import traceback

    import notify_transport as nt

    with nt.get_notification_transport(conf, "fake:///") as transport:
        def refuse(target, version):
            raise nt.InvalidTarget("no such topic here", target)
        transport._notification_sender = refuse
        notifier = nt.Notifier(transport, "host-1", driver="messagingv2", topics=["compute"])
        with caplog.at_level(logging.ERROR):
            notifier.info({}, "compute.start", {"n": 1})
            notifier.info({}, "compute.start", {"n": 2})
        failures = [r for r in caplog.records if "Could not send notification" in r.getMessage()]
        assert len(failures) == 2 and all("no such topic here" in r.getMessage() for r in failures)
        route = notifier._routes["INFO"][0][0]
        depths = []
        for _ in range(3):
            try:
                route({}, {}, None)
            except nt.InvalidTarget as exc:
                depths.append(len(traceback.extract_tb(exc.__traceback__)))
        assert depths[0] == depths[1] == depths[2]
