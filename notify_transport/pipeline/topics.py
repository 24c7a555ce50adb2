"""What the pipeline adds to the notification topic naming of :mod:`notify_transport.drivers.naming`.

Topic names are built and parsed in one place for the drivers, the CLI and the
pipeline (``drivers/naming.py``); the pipeline only adds which priorities
count as errors in its statistics.
"""
from __future__ import annotations

from notify_transport.drivers import naming

#: Priorities that count as errors in the statistics, as messages spell them (upper case).
ERROR_PRIORITIES: tuple[str, ...] = tuple(p.upper() for p in naming.ERROR_PRIORITIES)
