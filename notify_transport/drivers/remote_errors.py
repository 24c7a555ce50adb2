"""Exceptions across the wire, in oslo.messaging's format.

``{"class", "module", "message", "tb", "args", "kwargs"}`` as JSON; the client
rebuilds the original class (``<Class>_Remote``) only when its module is a
builtin or in ``allowed_remote_exmods``, else :class:`RemoteError`: importing
only listed modules keeps a reply from running arbitrary code.
"""
from __future__ import annotations

import json
import logging
import sys
import traceback
from types import TracebackType
from typing import Iterable, Union

from notify_transport.drivers.envelope import to_primitive
from notify_transport.exceptions import RemoteError

LOG = logging.getLogger(__name__)

_BUILTINS = "builtins"
_BUILTIN_ALIASES = ("exceptions", "builtins")
REMOTE_POSTFIX = "_Remote"

ExcInfo = tuple[type[BaseException], BaseException, Union[TracebackType, None]]


def serialize_remote_exception(failure: BaseException | ExcInfo) -> str:
    """The JSON string a server puts in a reply's ``failure`` field."""
    if isinstance(failure, BaseException):
        failure = (type(failure), failure, failure.__traceback__)
    tb = traceback.format_exception(*failure)
    exc = failure[1]
    kwargs = getattr(exc, "kwargs", None) or {}
    cls_name = type(exc).__name__
    mod_name = type(exc).__module__
    # A re-raised remote exception goes on under its original name.
    if cls_name.endswith(REMOTE_POSTFIX) and mod_name.endswith(REMOTE_POSTFIX):
        cls_name = cls_name[:-len(REMOTE_POSTFIX)]
        mod_name = mod_name[:-len(REMOTE_POSTFIX)]
    data = {"class": cls_name, "module": mod_name, "message": str(exc), "tb": tb,
            "args": exc.args, "kwargs": kwargs}
    return json.dumps(data, default=to_primitive)


def deserialize_remote_exception(data: str, allowed_remote_exmods: Iterable[str]) -> Exception:
    """Rebuild the exception described by ``data`` (see the module docstring)."""
    try:
        failure = json.loads(str(data))
    except ValueError:
        return RemoteError("Unknown", str(data), [])
    if not isinstance(failure, dict):
        return RemoteError("Unknown", str(data), [])
    trace = failure.get("tb", []) or []
    message = failure.get("message", "") + "\n" + "\n".join(trace)
    name = failure.get("class")
    module = failure.get("module")
    if module in _BUILTIN_ALIASES:
        module = _BUILTINS
    if module != _BUILTINS and module not in list(allowed_remote_exmods):
        return RemoteError(name, failure.get("message"), trace)
    try:
        if not isinstance(name, str):
            raise TypeError(f"the failure names no exception class ({name!r})")
        __import__(module)
        klass = getattr(sys.modules[module], name)
        if not (isinstance(klass, type) and issubclass(klass, Exception)):
            raise TypeError("Can only deserialize Exceptions")
        exc = klass(*failure.get("args", []), **(failure.get("kwargs") or {}))
    except (AttributeError, TypeError, ImportError, ValueError) as error:
        LOG.warning("Failed to rebuild remote exception %s.%s: %s", module, name, error)
        return RemoteError(name, failure.get("message"), trace)

    def str_override(self: BaseException) -> str:
        return message

    ex_type = type(exc)
    remote_type = type(ex_type.__name__ + REMOTE_POSTFIX, (ex_type,),
                       {"__str__": str_override, "__unicode__": str_override})
    remote_type.__module__ = f"{module}{REMOTE_POSTFIX}"
    try:
        # Swapping the class only works for exceptions defined in Python code.
        exc.__class__ = remote_type
    except TypeError:
        exc.args = (message,) + exc.args[1:]
    return exc
