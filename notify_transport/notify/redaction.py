"""The redacted context dict of an ``oslo_context.RequestContext``, without the copy.

``ctxt.redacted_copy().to_dict()`` builds a whole context to read 17 values
back, on every notification; :func:`redacted_dict` builds the same dict for oslo.context's
exact class only, once checked against the real methods on a probe context
(otherwise never used). It does not make the copy the thread's current context.
"""
from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable

LOG = logging.getLogger(__name__)

#: oslo.context's ``user_idt_format``, spelled as an f-string below (3x cheaper than format)
_USER_IDT_FORMAT = "{user} {project_id} {domain} {user_domain} {p_domain}"


def _build(ctxt: Any, new_request_id: Callable[[], str]) -> dict:
    """What ``RequestContext.redacted_copy().to_dict()`` returns, key for key, in its order."""
    user_id, project_id = ctxt.user_id, ctxt.project_id
    domain_id, user_domain_id = ctxt.domain_id, ctxt.user_domain_id
    project_domain_id = ctxt.project_domain_id
    idt_format = type(ctxt).user_idt_format  # the copy's: an instance attribute is not copied
    return {
        "user": user_id,
        "project_id": project_id,
        "system_scope": ctxt.system_scope,
        "project": project_id,
        "domain": domain_id,
        "user_domain": user_domain_id,
        "project_domain": project_domain_id,
        "is_admin": ctxt.is_admin,
        # the copy is made with these left at their defaults
        "read_only": False,
        "show_deleted": False,
        "auth_token": None,
        "request_id": ctxt.request_id or new_request_id(),
        "global_request_id": ctxt.global_request_id,
        "resource_uuid": None,
        "roles": ctxt.roles or [],
        "user_identity": (
            f"{user_id or '-'} {project_id or '-'} {domain_id or '-'} {user_domain_id or '-'} "
            f"{project_domain_id or '-'}" if idt_format == _USER_IDT_FORMAT else
            idt_format.format(
                user=user_id or "-", project_id=project_id or "-", domain=domain_id or "-",
                user_domain=user_domain_id or "-", p_domain=project_domain_id or "-")),
        "is_admin_project": True,
    }


def _compare(oslo_context: Any) -> bool:
    """Whether :func:`_build` gives what the real methods give, key order included."""
    cls = oslo_context.RequestContext
    probe = cls(auth_token="tok", user_id="u", project_id="p", domain_id="d",
                user_domain_id="ud", project_domain_id="pd", is_admin=True, read_only=True,
                show_deleted=True, request_id="req-1", resource_uuid="r", overwrite=False,
                roles=["a", "b"], user_name="un", project_name="pn", is_admin_project=False,
                service_token="st", service_user_id="su", service_roles=["sr"],
                global_request_id="greq-1", system_scope="all")
    same = (list(probe.redacted_copy().to_dict().items())   # key order too: same JSON bytes
            == list(_build(probe, oslo_context.generate_request_id).items()))
    empty = cls(overwrite=False)
    return same and (list(empty.redacted_copy().to_dict())
                     == list(_build(empty, oslo_context.generate_request_id)))


@functools.cache
def _check() -> tuple[type, Callable[[], str]] | bool:
    """(the class, its request id generator) if :func:`_build` matches it, else False.

    The comparison runs once, in a short-lived thread of its own: ``redacted_copy()``
    makes its copy the current context of the thread it runs in (a thread-local), and
    the caller's current context must stay what it was.
    """
    try:
        from oslo_context import context as oslo_context
    except ImportError:
        return False
    outcome: list[bool | BaseException] = []

    def compare() -> None:
        try:
            outcome.append(_compare(oslo_context))
        except Exception as exc:  # noqa: BLE001 - an unexpected oslo.context: use its own methods
            outcome.append(exc)

    worker = threading.Thread(target=compare, name="oslo-context-redaction-check", daemon=True)
    worker.start()
    worker.join()
    result = outcome[0] if outcome else RuntimeError("the check did not run")
    if isinstance(result, BaseException):
        LOG.debug("oslo.context redaction shortcut disabled: %s", result)
        return False
    if not result:
        LOG.debug("oslo.context redaction shortcut disabled: this version builds another dict")
        return False
    return oslo_context.RequestContext, oslo_context.generate_request_id


def redacted_dict(ctxt: Any) -> dict | None:
    """``ctxt.redacted_copy().to_dict()`` for oslo.context's own class, else None."""
    checked = _check()
    if checked is False or type(ctxt) is not checked[0]:  # type: ignore[index]
        return None
    return _build(ctxt, checked[1])  # type: ignore[index]
