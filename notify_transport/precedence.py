"""Where a listener option may be said, and which saying wins: decided here and nowhere else.

A listener's delivery options (``delivery_mode``, ``workers``, ``max_attempts``
...) can be given in several places. The strongest source that gives a value
(anything but None) wins; :data:`ORDER` lists them strongest first, and the
table in ``doc/source/configuration.rst`` says the same (a test compares them):

1. a keyword argument of ``get_notification_listener`` (code);
2. the ``[listener:NAME]`` section of ``notify-transport serve``;
3. an attribute of the endpoint class ``serve`` runs (deprecated for delivery
   options: each use logs a warning);
4. the transport URL's query (``?workers=8``), for services that only set a URL;
5. the driver's configuration group (``[oslo_messaging_kafka]``);
6. the option's default.

Every merge point calls :func:`pick` with the sources it sees: the driver
(keyword, query, group) and ``serve`` (section, endpoint); ``serve`` hands what
it picked to the driver as keywords, which keeps the order above.
"""
from __future__ import annotations

import enum
import logging
from typing import Any, Iterable, Mapping

LOG = logging.getLogger(__name__)


class Source(enum.Enum):
    """A place an option can be said; the value is how messages name it."""

    KEYWORD = "keyword argument"
    SECTION = "[listener:NAME] section"
    ENDPOINT = "endpoint attribute"
    URL_QUERY = "transport URL query"
    CONFIG_GROUP = "driver configuration group"


#: Strongest first.
ORDER: tuple[Source, ...] = tuple(Source)

#: Sources still read for delivery options, with a warning, and what to write instead.
DEPRECATED: Mapping[Source, str] = {
    Source.ENDPOINT: "set it in the listener's [listener:NAME] section (or pass it as a keyword argument)",
}

Said = Mapping[Source, Mapping[str, Any]]


def pick(name: str, said: Said, default: Any = None) -> Any:
    """The value of option ``name`` from the strongest source in ``said`` that gives one
    (None counts as not given), else ``default``."""
    source = source_of(name, said)
    return default if source is None else said[source][name]


def source_of(name: str, said: Said) -> Source | None:
    """Which source :func:`pick` takes ``name`` from (None: the default)."""
    for source in ORDER:
        values = said.get(source)
        if values is not None and values.get(name) is not None:
            return source
    return None


def attributes(obj: Any, names: Iterable[str]) -> dict[str, Any]:
    """``obj``'s attributes among ``names`` (the ones it lacks left out): a source for :func:`pick`."""
    return {name: getattr(obj, name) for name in names if getattr(obj, name, None) is not None}


def warn_deprecated(names: Iterable[str], said: Said, where: str) -> None:
    """Log a warning for each option of ``names`` that :func:`pick` takes from a deprecated source."""
    for name in names:
        source = source_of(name, said)
        if source is not None and source in DEPRECATED:
            LOG.warning("%s: option %s comes from an %s, which is deprecated: %s", where, name,
                        source.value, DEPRECATED[source])
