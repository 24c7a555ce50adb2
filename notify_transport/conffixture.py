"""``ConfFixture``: tweak the messaging options in unit tests, as ``oslo_messaging.conffixture``.

::

    self.messaging_conf = self.useFixture(notify_transport.conffixture.ConfFixture(cfg.CONF))
    self.messaging_conf.transport_url = "fake:/"

Needs the ``fixtures`` package (a test dependency, as for oslo.messaging's).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import fixtures
from oslo_config import cfg

from notify_transport import options
from notify_transport.drivers.config import register_opts

__all__ = ["ConfFixture"]

#: option names of before oslo.messaging 5, still accepted by set_override/clear_override
_OLD_NOTIFIER_NAMES = {"notification_driver": "driver", "notification_transport_url": "transport_url",
                       "notification_topics": "topics"}


class ConfFixture(fixtures.Fixture):
    """Registers every option of the library on ``conf`` and resets it after the test.

    ``transport_url`` and ``response_timeout`` read and override the options;
    ``conf.set_override('notification_driver', ...)`` and the other pre-group
    names are mapped to ``[oslo_messaging_notifications]`` while it is in use.
    """

    def __init__(self, conf: cfg.ConfigOpts, transport_url: str | None = None) -> None:
        super().__init__()
        self.conf = conf
        for group, opts in options.list_opts():
            register_opts(conf, opts, group)
        if transport_url is not None:
            self.transport_url = transport_url

    def _wrap(self, name: str, old_args: Callable[[tuple], tuple]) -> None:
        original = getattr(self.conf, name)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if args and args[0] in _OLD_NOTIFIER_NAMES:
                args = old_args(args)
            return original(*args, **kwargs)
        setattr(self.conf, name, wrapper)
        self.addCleanup(setattr, self.conf, name, original)

    def setUp(self) -> None:
        super().setUp()
        group = options.NOTIFICATIONS_GROUP
        self._wrap("set_override", lambda a: (_OLD_NOTIFIER_NAMES[a[0]], a[1], group))
        self._wrap("clear_override", lambda a: (_OLD_NOTIFIER_NAMES[a[0]], group))
        self.addCleanup(self.conf.reset)

    @property
    def transport_url(self) -> str:
        """The ``[DEFAULT] transport_url``."""
        return self.conf.transport_url

    @transport_url.setter
    def transport_url(self, value: str) -> None:
        self.conf.set_override("transport_url", value)

    @property
    def response_timeout(self) -> int:
        """Default number of seconds to wait for a response from a call."""
        return self.conf.rpc_response_timeout

    @response_timeout.setter
    def response_timeout(self, value: int) -> None:
        self.conf.set_override("rpc_response_timeout", value)
