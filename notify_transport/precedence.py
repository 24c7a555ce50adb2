"""Where a listener option may be said, and which saying wins: decided here and nowhere else.

The strongest source that gives a value (not None) wins; :data:`ORDER` lists them
strongest first and the table in ``doc/source/configuration.rst`` says the same (a
test compares them). The driver (keyword, URL query, config group) and ``serve``
(section, endpoint attribute) call :func:`pick`; ``serve`` hands its pick to the driver
as a keyword, which keeps the order.
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
