"""Our options keep oslo.messaging's names, types and defaults, in our own words, and both
libraries can register them in one process in either order."""
from __future__ import annotations

import copy
import re

import pytest
from oslo_config import cfg

from notify_transport import options as our_options
from notify_transport.drivers.config import register_opts

oslo_opts = pytest.importorskip("oslo_messaging.opts")


def _norm(text: str | None) -> str:
    return re.sub(r"\s+", " ", (text or "").strip().lower())


def _theirs() -> dict[tuple[str, str], cfg.Opt]:
    return {(group or "DEFAULT", opt.name): opt for group, opts in oslo_opts.list_opts() for opt in opts}


def _ours() -> list[tuple[str, cfg.Opt]]:
    return [(group or "DEFAULT", opt) for group, opts in our_options.list_opts() for opt in opts]


def test_no_option_help_is_oslo_messaging_s_sentence():
    theirs = _theirs()
    copied = [f"[{group}] {opt.name}" for group, opt in _ours()
              if (group, opt.name) in theirs and _norm(opt.help) == _norm(theirs[group, opt.name].help)]
    assert copied == []


def test_shared_options_are_the_same_setting_as_oslo_messaging_s():
    """Names, types, defaults and deprecated names stay oslo.messaging's where both have an option
    (where this project means something else, the option has a name of its own)."""
    theirs = _theirs()
    differ = []
    for group, opt in _ours():
        other = theirs.get((group, opt.name))
        if other is None:
            continue
        shown = ("help", "secret", "_set_location")  # ours mask a key password oslo's shows
        mine = {k: v for k, v in vars(opt).items() if k not in shown}
        them = {k: v for k, v in vars(other).items() if k not in shown}
        if mine != them:
            differ.append(f"[{group}] {opt.name}: " + ", ".join(sorted(k for k in mine if mine[k] != them.get(k))))
    assert differ == [], differ


@pytest.mark.parametrize("oslo_first", [False, True])
def test_both_libraries_register_in_either_order(oslo_first):
    conf = cfg.ConfigOpts()
    theirs: dict[str, list[cfg.Opt]] = {}
    for (group, _name), opt in _theirs().items():
        theirs.setdefault(group, []).append(opt)
    ours: dict[str, list[cfg.Opt]] = {}
    for group, opt in _ours():
        if (group, opt.name) in _theirs():
            ours.setdefault(group, []).append(opt)
    for group in ours:
        oslo_group = None if group == "DEFAULT" else group
        steps = [lambda: conf.register_opts(theirs[group], group=oslo_group),
                 lambda: register_opts(conf, ours[group], oslo_group)]
        for step in (reversed(steps) if not oslo_first else steps):
            step()
    conf([])
    assert conf.oslo_messaging_kafka.consumer_group == "oslo_messaging_consumer"


def test_a_different_setting_is_still_refused():
    conf = cfg.ConfigOpts()
    other = copy.deepcopy(_theirs()["oslo_messaging_kafka", "consumer_group"])
    other.default = "elsewhere"
    register_opts(conf, [other], "oslo_messaging_kafka")
    with pytest.raises(cfg.DuplicateOptError):
        conf.register_opts([_theirs()["oslo_messaging_kafka", "consumer_group"]], group="oslo_messaging_kafka")
