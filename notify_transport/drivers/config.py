"""Option registration and URL-query overrides shared by every driver.

A driver declares its options as an oslo.config group; :func:`resolve_options`
reads the group and lets ``?key=value`` in the transport URL override any of
them (the order :mod:`notify_transport.precedence` decides), converting the
value with the option's own type. An unknown key is an
error that names it, so a typo never silently falls back to a default.
"""
from __future__ import annotations

import copy
import difflib
import functools
import logging
import types
from typing import Any, Iterable, Mapping

from oslo_config import cfg

from notify_transport.exceptions import ConfigurationError, InvalidTransportURL
from notify_transport.precedence import Source, pick

LOG = logging.getLogger(__name__)


#: Attributes of an option that are no part of the setting: how it is shown (its help text,
#: whether its value is masked in logs: ours mask a key password that oslo.messaging's does
#: not) and where in the code it was defined (oslo.config ignores that one too).
_NOT_THE_SETTING = frozenset({"help", "secret", "_set_location"})


class _SameSetting:
    """Mixed into a registered option: another option with the same name, type, default,
    deprecated names and every other attribute is the same setting, whatever its help says.

    oslo.config refuses a second registration of a name unless the options are equal, and
    compares them with ``!=``. Our compatibility options share oslo.messaging's names in
    our own words: registered through :func:`register_opts`, ours compare equal to
    oslo.messaging's in either order (the registered one is the left operand; when it is
    oslo's, Python asks this subclass first).
    """

    def __eq__(self, another: object) -> bool:
        if not isinstance(another, cfg.Opt):
            return NotImplemented
        return _setting(self) == _setting(another)

    def __ne__(self, another: object) -> bool:
        if not isinstance(another, cfg.Opt):
            return NotImplemented
        return _setting(self) != _setting(another)

    __hash__ = None  # type: ignore[assignment]  # equal options need not be one object


def _setting(opt: object) -> dict[str, Any]:
    return {k: v for k, v in vars(opt).items() if k not in _NOT_THE_SETTING}


@functools.lru_cache(maxsize=None)
def _same_setting_class(kind: type) -> type:
    return type(kind.__name__, (_SameSetting, kind), {"__module__": __name__})


def shared(opt: cfg.Opt) -> cfg.Opt:
    """A copy of ``opt`` that equals any option which differs from it in help text only."""
    if isinstance(opt, _SameSetting):
        return opt
    mine = copy.copy(opt)
    mine.__class__ = _same_setting_class(type(opt))  # type: ignore[arg-type]  # a class is hashable
    return mine


def register_opts(conf: cfg.ConfigOpts, opts: Iterable[cfg.Opt], group: str | None = None) -> None:
    """Register ``opts`` (through :func:`shared`), sharing an option another library
    registered already when it is the same setting.

    Our compatibility options keep oslo.messaging's names, types and defaults in our own
    words: oslo.messaging may register its own before or after ours in one process.
    """
    if group is not None:
        conf.register_group(cfg.OptGroup(group))
    for opt in opts:
        try:
            conf.register_opt(shared(opt), group=group)
        except cfg.DuplicateOptError:
            _check_shared(conf, opt, group)
            LOG.debug("Option [%s] %s already registered; sharing it", group, opt.name)


def _check_shared(conf: cfg.ConfigOpts, opt: cfg.Opt, group: str | None) -> None:
    """Accept an option another library registered only if it is the same setting.

    oslo.config has no public way to fetch the registered option: while the value
    is still the other default, that default must equal ours and our type accept it.
    """
    value = getattr(conf[group] if group else conf, opt.dest)
    ours = opt.type(opt.default) if isinstance(opt.default, str) and opt.type else opt.default
    info = conf.get_location(opt.dest, group)
    location = info.location if info is not None else None
    same = True
    if location is cfg.Locations.opt_default:
        same = value == ours
    elif value is not None and opt.type is not None and not isinstance(opt, (cfg.ListOpt, cfg.DictOpt)):
        try:
            opt.type(value)
        except (TypeError, ValueError):
            same = False
    if not same:
        raise ConfigurationError(
            f"Option [{group or 'DEFAULT'}] {opt.name} is registered by another "
            f"library with a different type or default ({value!r} vs {opt.default!r})")


def resolve_options(conf: cfg.ConfigOpts, group: str, opts: Iterable[cfg.Opt],
                    query: Mapping[str, str], url_for_errors: str = "") -> types.SimpleNamespace:
    """Return the group's option values with the URL query applied on top.

    Raises :class:`InvalidTransportURL` naming the key when the query holds an
    option the group does not have or a value the option's type rejects.
    """
    opts = list(opts)
    register_opts(conf, opts, group)
    by_name = {o.name: o for o in opts}
    section = getattr(conf, group)
    said = {Source.URL_QUERY: _query_values(by_name, query, group, url_for_errors),
            Source.CONFIG_GROUP: {o.dest: getattr(section, o.dest) for o in opts}}
    return types.SimpleNamespace(**{o.dest: pick(o.dest, said) for o in opts})


def _query_values(by_name: Mapping[str, cfg.Opt], query: Mapping[str, str], group: str,
                  url_for_errors: str) -> dict[str, Any]:
    """The URL query's options, by dest, each converted by its option's type."""
    values: dict[str, Any] = {}
    for key, raw in query.items():
        opt = by_name.get(key)
        if opt is None:
            close = difflib.get_close_matches(key, by_name, 1)
            raise InvalidTransportURL(
                url_for_errors,
                f"Unknown option {key!r} in transport URL query" + (
                    f" (did you mean {close[0]}?)" if close else
                    f"; the options of [{group}] are: {', '.join(sorted(by_name))}"),
                f"fix the key in the URL's query: its keys are the options of [{group}]")
        try:
            if isinstance(opt, (cfg.ListOpt, cfg.MultiStrOpt)):
                value: Any = [opt.type(v) if opt.type and not isinstance(opt, cfg.ListOpt) else v
                              for v in raw.split(",") if v]
                if isinstance(opt, cfg.ListOpt):
                    value = opt.type(raw)
            elif isinstance(opt, cfg.DictOpt):
                value = opt.type(raw)
            else:
                value = opt.type(raw)
        except (ValueError, TypeError) as exc:
            raise InvalidTransportURL(
                url_for_errors, f"Invalid value {raw!r} for {key!r} in transport URL: {exc}",
                f"fix the value of {key} in the URL's query (see its help in the configuration guide)") from None
        if opt.deprecated_for_removal:
            LOG.warning("%s: option %s in the transport URL query is deprecated: %s", url_for_errors or group,
                        key, opt.deprecated_reason)
        values[opt.dest] = value
    return values
