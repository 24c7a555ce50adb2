"""Exceptions across the wire in oslo.messaging's format, checked against oslo's own functions."""
import json
import sys

import pytest

from notify_transport.drivers.remote_errors import (deserialize_remote_exception,
                                                    serialize_remote_exception)
from notify_transport.exceptions import RemoteError

rpc_common = pytest.importorskip("oslo_messaging._drivers.common")
oslo_messaging = pytest.importorskip("oslo_messaging")


class AppError(Exception):
    def __init__(self, message, code=0):
        super().__init__(message)
        self.kwargs = {"code": code}


def raised(exc):
    try:
        raise exc
    except Exception:
        return sys.exc_info()


def test_serialized_form_is_oslos():
    ours = json.loads(serialize_remote_exception(raised(AppError("bad", code=4))))
    theirs = json.loads(rpc_common.serialize_remote_exception(raised(AppError("bad", code=4))))
    assert ours.keys() == theirs.keys()
    for key in ("class", "module", "message", "args", "kwargs"):
        assert ours[key] == theirs[key]
    assert ours["class"] == "AppError" and ours["module"] == __name__
    assert any("AppError: bad" in line for line in ours["tb"])


def test_not_allowed_module_gives_remote_error():
    err = deserialize_remote_exception(serialize_remote_exception(raised(AppError("bad"))), [])
    assert isinstance(err, RemoteError)
    assert (err.exc_type, err.value) == ("AppError", "bad")
    assert "Remote error: AppError bad" in str(err)


def test_allowed_module_reraises_as_remote_subclass():
    err = deserialize_remote_exception(serialize_remote_exception(raised(AppError("bad", code=3))),
                                       [__name__])
    assert isinstance(err, AppError) and type(err).__name__ == "AppError_Remote"
    assert type(err).__module__ == f"{__name__}_Remote"
    assert str(err).startswith("bad\n")  # message, then the remote traceback
    # re-serialized (cells), it goes on under its original name
    again = json.loads(serialize_remote_exception(err))
    assert (again["class"], again["module"]) == ("AppError", __name__)


def test_builtins_always_reraised():
    err = deserialize_remote_exception(serialize_remote_exception(raised(KeyError("k"))), [])
    assert isinstance(err, KeyError)


@pytest.mark.parametrize("exc", [ValueError("v"), AppError("a", code=1)])
def test_interop_with_oslo_both_ways(exc):
    allowed = [__name__]
    from_oslo = deserialize_remote_exception(rpc_common.serialize_remote_exception(raised(exc)), allowed)
    from_us = rpc_common.deserialize_remote_exception(serialize_remote_exception(raised(exc)), allowed)
    assert type(from_oslo).__mro__[1:] == type(from_us).__mro__[1:] or type(from_oslo) is type(from_us)
    assert str(from_oslo).split("\n")[0] == str(from_us).split("\n")[0]
    plain_oslo = rpc_common.deserialize_remote_exception(serialize_remote_exception(raised(AppError("x"))), [])
    assert isinstance(plain_oslo, oslo_messaging.RemoteError) and plain_oslo.exc_type == "AppError"


def test_garbage_failure_still_raises_something_useful():
    assert isinstance(deserialize_remote_exception("not json", []), RemoteError)
    bad_class = json.dumps({"class": "Nope", "module": __name__, "message": "m", "tb": []})
    assert isinstance(deserialize_remote_exception(bad_class, [__name__]), RemoteError)
    not_exc = json.dumps({"class": "dumps", "module": "json", "message": "m", "tb": []})
    assert isinstance(deserialize_remote_exception(not_exc, ["json"]), RemoteError)
