"""The RabbitMQ driver as the layers above it see it: the only module of the driver they import.

A name's module is imported on first use, so that reading the options does not load pika.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: What the layers above may use, and the module of the driver that defines it.
_HOMES = {
    "RabbitDriver": "driver",
    "GROUP": "options",
    "all_opts": "options",
}
__all__ = sorted(_HOMES)

if TYPE_CHECKING:  # the same names, for type checkers (tests/unit/test_layers.py compares)
    from notify_transport.drivers.rabbit.driver import RabbitDriver  # noqa: F401
    from notify_transport.drivers.rabbit.options import GROUP, all_opts  # noqa: F401


def __getattr__(name: str) -> Any:
    """Import a name's module on first use: importing the package stays cheap."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
