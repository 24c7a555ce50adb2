"""The RabbitMQ driver as the layers above it see it: the only module of the driver they import.

A name's module is imported on first use, so that reading the options does not load pika.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from notify_transport.drivers.face import lazy_names

if TYPE_CHECKING:  # the face: what the layers above may use (read by lazy_names too)
    from notify_transport.drivers.rabbit.driver import RabbitDriver  # noqa: F401
    from notify_transport.drivers.rabbit.options import GROUP, all_opts  # noqa: F401


__all__, __getattr__ = lazy_names(__name__, __file__)
