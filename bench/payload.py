"""The notification every implementation sends: same context, same payload, same bytes.

The message on the wire is oslo.messaging's ``messagingv2`` envelope of about
1.3 KB. The context is an ``oslo_context.RequestContext`` (what services pass),
because oslo.messaging 18 drops plain-dict contexts: with it, oslo.messaging,
notify-transport and the pre-encoded raw bytes carry identical contexts.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import Any

PUBLISHER_ID = "compute.bench-host-01"
EVENT_TYPE = "compute.instance.update"
#: Size of the encoded envelope the payload is padded to.
ENVELOPE_BYTES = 1300


def make_context(kind: str = "request") -> Any:
    """The request context passed to ``Notifier.info``: ``request`` or ``none``."""
    if kind == "none":
        return None
    from oslo_context import context  # a dependency of oslo.messaging, installed with it

    return context.RequestContext(
        user_id="5a9b6c0e4f2d4c1b9e3f7a8d6c5b4a31", project_id="8d1c2e3f4a5b6c7d8e9f0a1b2c3d4e5f",
        request_id="req-1c1a7e55-9f43-4d4e-8a7e-2b9c1e6d7f80", roles=["member", "reader"],
        is_admin=False, overwrite=False)


def context_dict(ctxt: Any) -> dict:
    """What both libraries put in ``_context`` for ``ctxt`` (redacted, as a dict)."""
    if ctxt is None:
        return {}
    return ctxt.redacted_copy().to_dict()


def _base_payload(pad: int) -> dict:
    return {
        "instance_id": "0f3c5a4e-6d7b-4c8a-9e1f-2a3b4c5d6e7f",
        "display_name": "bench-vm-01",
        "state": "active", "old_state": "building",
        "host": "bench-host-01", "flavor": {"name": "m1.small", "vcpus": 1, "memory_mb": 2048},
        "metadata": {"note": "x" * pad},
        "sent_at": 0.0,
    }


def make_payload(ctxt: Any = None, envelope_bytes: int = ENVELOPE_BYTES) -> dict:
    """A payload dict sized so the whole encoded envelope is about ``envelope_bytes``."""
    pad = 0
    size = len(encode_envelope(_base_payload(pad), context_dict(ctxt)))
    pad = max(0, envelope_bytes - size)
    return _base_payload(pad)


def make_message(payload: dict, priority: str = "INFO") -> dict:
    """An oslo notification message dict, as the Notifier of either library builds it."""
    return {"message_id": str(uuid.uuid4()), "publisher_id": PUBLISHER_ID,
            "event_type": EVENT_TYPE, "priority": priority, "payload": payload,
            "timestamp": time.strftime("%Y-%m-%d %H:%M:%S.000000", time.gmtime())}


def encode_envelope(payload: dict, ctxt: dict, priority: str = "INFO") -> bytes:
    """The ``messagingv2`` bytes oslo.messaging's Kafka driver sends for this notification."""
    msg = make_message(payload, priority)
    msg["_context"] = ctxt
    inner = json.dumps(msg)
    return json.dumps({"oslo.version": "2.0", "oslo.message": inner}).encode("utf-8")


def stamped(payload: dict) -> dict:
    """A copy of ``payload`` carrying the send time (``time.time()``) for latency."""
    out = dict(payload)
    out["sent_at"] = time.time()
    return out
