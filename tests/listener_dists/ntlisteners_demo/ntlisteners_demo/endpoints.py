"""Two listeners recording what they receive, one line per notification.

Each appends ``NAME SEQ`` to ``$NT_LISTENER_RECORD`` (when set), so a test
can read what every listener dispatched, even across processes.
``$NT_LISTENER_DELAY`` (seconds) slows each dispatch down, so that a stop
lands while work is in flight.
"""
import os
import threading
import time

_LOCK = threading.Lock()


def _record(name, payload):
    delay = float(os.environ.get("NT_LISTENER_DELAY") or 0)
    if delay:
        time.sleep(delay)
    path = os.environ.get("NT_LISTENER_RECORD")
    if path:
        with _LOCK, open(path, "a") as out:
            out.write(f"{name} {payload['seq']}\n")
            out.flush()


class AuditEndpoint:
    """Requeues (its section sets at-least-once with two workers); built with the service's ConfigOpts."""

    topics = ["notifications"]
    allow_requeue = True

    def __init__(self, conf):
        self.conf = conf

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        _record("audit", payload)

    warn = info


class BillingEndpoint:
    """The default delivery mode; its pool is the entry name unless configured."""

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        _record("billing", payload)


def make_billing():
    """A factory returning the endpoint."""
    return BillingEndpoint()
