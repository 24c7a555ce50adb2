"""Driver registry and URL precedence."""
import pytest

import notify_transport as nt
from notify_transport.transport import installed_drivers


def test_unknown_scheme_lists_installed(conf):
    with pytest.raises(nt.DriverLoadFailure) as err:
        nt.get_notification_transport(conf, "nosuch://u:pw@h/")
    assert "nosuch" in str(err.value) and "kafka" in str(err.value) and "fake" in str(err.value)
    assert "pw" not in str(err.value)


def test_installed_drivers():
    assert {"kafka", "fake", "rabbit"} <= set(installed_drivers())


def test_url_precedence(conf):
    from notify_transport.options import register_notifier_opts, register_transport_opts
    register_transport_opts(conf)
    register_notifier_opts(conf)
    conf.set_override("transport_url", "fake:///rpcvhost")
    t = nt.get_notification_transport(conf)
    assert t.url.virtual_host == "rpcvhost"
    conf.set_override("transport_url", "fake:///notifyvhost", group="oslo_messaging_notifications")
    assert nt.get_notification_transport(conf).url.virtual_host == "notifyvhost"
    assert nt.get_notification_transport(conf, "fake:///arg").url.virtual_host == "arg"


def test_rpc_on_notification_only_driver_is_refused(conf):
    with pytest.raises(nt.NotSupported, match="notifications only"):
        nt.get_rpc_transport(conf, "kafka://127.0.0.1:1")


def test_fake_driver_rejects_query(conf):
    with pytest.raises(nt.InvalidTransportURL, match="bogus"):
        nt.get_notification_transport(conf, "fake://?bogus=1")


def test_transport_repr_hides_password(conf):
    t = nt.get_notification_transport(conf, "fake://u:topsecret@h/")
    assert "topsecret" not in repr(t)


def test_drivers_do_not_import_the_api_layer():
    import ast
    import pathlib
    root = pathlib.Path(nt.__file__).parent / "drivers"
    forbidden = ("notify_transport.transport", "notify_transport.notify", "notify_transport.rpc",
                 "notify_transport.cli", "notify_transport.pipeline")
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith(forbidden)]
    assert offenders == []
