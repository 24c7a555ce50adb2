"""The end-of-session sweep of the RabbitMQ fixtures deletes this session's queues, no one else's.

Several test sessions share the machine's broker. A sweep that deleted every
``nt_test_`` queue deleted the queues of tests running in other sessions: the
topic queue of test_ntrabbit_reconnect went while casts flowed, the broker
returned the next casts as unroutable, and the test reported them lost.
"""
from __future__ import annotations

import shutil
import uuid

import pytest

from rabbit_fixtures import SESSION_PREFIX, sweep_test_queues

pytestmark = pytest.mark.functional

if not shutil.which("rabbitmqctl"):
    pytest.skip("the sweep lists queues with rabbitmqctl", allow_module_level=True)


def test_the_sweep_leaves_other_sessions_queues_alone(rabbit_admin, unique):
    ours = unique("sweep")
    theirs = f"nt_test_{uuid.uuid4().hex[:6]}_other_session_{uuid.uuid4().hex[:8]}"  # as another session names
    assert not theirs.startswith(SESSION_PREFIX)
    rabbit_admin.queues.add(theirs)  # removed after the test whatever happens
    rabbit_admin.declare_queue(ours)
    rabbit_admin.declare_queue(theirs)
    sweep_test_queues()
    assert not rabbit_admin.queue_exists(ours)
    assert rabbit_admin.queue_exists(theirs)
