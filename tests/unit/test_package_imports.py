"""Importing a part of the package imports only that part: the public names load on first use.

Spark starts a dozen Python processes per pipeline run, and each that reads
Kafka imports the group-less reader; none of them needs the transport, the
notifier or oslo.config (the reader's own imports), so ``notify_transport``
and ``notify_transport.reading`` load their names lazily.
"""
from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import notify_transport
from notify_transport import reading


def _loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    done = subprocess.run([sys.executable, "-c", f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"],
                          capture_output=True, text=True, check=True, timeout=60)
    return set(done.stdout.split())


def test_the_reader_loads_neither_the_api_nor_oslo_config():
    loaded = _loaded_after("import notify_transport, notify_transport.reading.reader")
    assert {"notify_transport.transport", "notify_transport.notify", "notify_transport.rpc",
            "oslo_config"}.isdisjoint(loaded)


def test_a_transport_outside_eventlet_loads_no_integration():
    loaded = _loaded_after("import notify_transport.transport")
    assert not {name for name in loaded if name.startswith("notify_transport.integrations")}


def test_the_check_sees_the_api_once_a_name_is_used():
    assert "notify_transport.transport" in _loaded_after("import notify_transport\nnotify_transport.Notifier")


@pytest.mark.parametrize("package", [notify_transport, reading], ids=lambda p: p.__name__)
def test_every_public_name_resolves_to_its_home(package):
    from notify_transport.drivers.face import declared_names

    homes = declared_names(package.__file__)
    assert homes and set(homes) <= set(package.__all__)
    for name, home in homes.items():
        assert getattr(package, name) is getattr(importlib.import_module(home), name)


def test_the_version_and_oslo_messaging_s_submodules_are_attributes():
    from notify_transport import dispatcher, server

    assert notify_transport.__version__ and "__version__" in notify_transport.__all__
    assert notify_transport.server is server and notify_transport.dispatcher is dispatcher
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(notify_transport, "no_such_name")
