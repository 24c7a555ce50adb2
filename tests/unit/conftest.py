"""Fixtures shared by the unit tests (no broker)."""
from __future__ import annotations

from typing import Iterator

import pytest
from oslo_config import cfg

import notify_transport as nt


@pytest.fixture
def fake_transport() -> Iterator[nt.NotificationTransport]:
    """A notification transport on the in-process ``fake://`` driver, cleaned up after the test."""
    conf = cfg.ConfigOpts()
    conf([])
    transport = nt.get_notification_transport(conf, "fake:///")
    yield transport
    transport.cleanup()
