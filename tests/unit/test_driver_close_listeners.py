"""drivers/base.close_listeners: a transport's cleanup releases every listener, even past a failure."""
from __future__ import annotations

import logging

import pytest

from notify_transport.drivers.base import close_listeners


class _Listener:
    def __init__(self, name: str, fail_on: str = "") -> None:
        self.name, self.fail_on = name, fail_on
        self.calls: list[str] = []

    def __repr__(self) -> str:
        return f"<listener {self.name}>"

    def _call(self, what: str) -> None:
        self.calls.append(what)
        if what == self.fail_on:
            raise RuntimeError(f"{self.name} {what} broke")

    def stop(self) -> None:
        self._call("stop")

    def cleanup(self) -> None:
        self._call("cleanup")


@pytest.mark.parametrize("fail_on", ["stop", "cleanup"])
def test_a_failing_listener_is_logged_and_the_others_are_closed(caplog, fail_on) -> None:
    first, broken, last = _Listener("a"), _Listener("b", fail_on), _Listener("c")
    with caplog.at_level(logging.ERROR, logger="notify_transport.drivers.base"):
        close_listeners(iter([first, broken, last]))
    assert first.calls == last.calls == ["stop", "cleanup"]
    assert broken.calls == (["stop"] if fail_on == "stop" else ["stop", "cleanup"])
    assert [r.getMessage() for r in caplog.records] == ["Closing <listener b> failed"]
    assert f"b {fail_on} broke" in caplog.text
