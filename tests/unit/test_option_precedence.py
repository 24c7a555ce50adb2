"""The order in which a listener option's sources win, walked through the public entry points.

The configuration guide's table, ``notify_transport.precedence.ORDER`` and what a
listener really gets must agree: for each source of a path (code on the API, or
``notify-transport serve``), the option is set there and in every weaker source,
each to a different value, and the listener must get that source's value.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from oslo_config import cfg

import notify_transport as nt
from notify_transport.listeners import RegisteredEntry, describe
from notify_transport.precedence import ORDER, Source

DOC = Path(__file__).resolve().parents[2] / "doc" / "source" / "configuration.rst"
#: A delivery option every source can give; each source's value is its rank's.
OPTION = "shutdown_timeout"
DEFAULT = 30.0
#: The sources one path can combine: code on the API, and ``serve``.
API = (Source.KEYWORD, Source.URL_QUERY, Source.CONFIG_GROUP)
SERVE = (Source.SECTION, Source.ENDPOINT, Source.URL_QUERY, Source.CONFIG_GROUP)


def value(source: Source) -> float:
    return 10.0 + ORDER.index(source)


class Endpoint:
    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        return None


def listener_gets(tmp_path: Path, path: tuple[Source, ...], given: tuple[Source, ...]) -> float:
    """The option's value a Kafka listener made along ``path`` gets, the sources ``given`` set."""
    lines = []
    if Source.CONFIG_GROUP in given:
        lines += ["[oslo_messaging_kafka]", f"{OPTION} = {value(Source.CONFIG_GROUP)}"]
    if Source.SECTION in given:
        lines += ["[listener:walk]", f"{OPTION} = {value(Source.SECTION)}"]
    config = tmp_path / "walk.conf"
    config.write_text("\n".join(lines) + "\n")
    conf = cfg.ConfigOpts()
    conf(["--config-file", str(config)])
    query = f"?{OPTION}={value(Source.URL_QUERY)}" if Source.URL_QUERY in given else ""
    transport = nt.get_notification_transport(conf, f"kafka://127.0.0.1:1/{query}")
    try:
        keywords = {}
        if path is SERVE:
            endpoint = Endpoint()
            if Source.ENDPOINT in given:
                setattr(endpoint, OPTION, value(Source.ENDPOINT))
            keywords = describe(RegisteredEntry("walk", "tests:Endpoint", "tests 0"), endpoint, conf).driver_options
        elif Source.KEYWORD in given:
            keywords = {OPTION: value(Source.KEYWORD)}
        listener = transport._listen_for_notifications([(nt.Target(topic="t"), "info")], "walk", **keywords)
        return listener.settings.shutdown_timeout
    finally:
        transport.cleanup()


def test_the_documented_table_is_the_order_the_code_keeps():
    text = DOC.read_text()
    table = text[text.index("Where a listener option is said"):text.index("Sample configuration file")]
    first_cells = re.findall(r"^   \* - (.+)$", table, re.MULTILINE)
    assert first_cells[0] == "Source"
    assert first_cells[1:] == [source.value for source in ORDER] + ["the option's default"]


@pytest.mark.parametrize("path", [API, SERVE], ids=["api", "serve"])
def test_each_source_wins_over_every_weaker_one(tmp_path, path):
    assert listener_gets(tmp_path, path, ()) == DEFAULT
    for rank, source in enumerate(path):
        assert listener_gets(tmp_path, path, path[rank:]) == value(source), source
        # and it loses to every stronger one of the path
        for stronger in path[:rank]:
            assert listener_gets(tmp_path, path, (stronger, source)) == value(stronger), (stronger, source)


def test_a_delivery_option_from_an_endpoint_attribute_is_deprecated(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="notify_transport.precedence"):
        assert listener_gets(tmp_path, SERVE, (Source.ENDPOINT,)) == value(Source.ENDPOINT)
    warned = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert len(warned) == 1 and OPTION in warned[0] and "[listener:NAME]" in warned[0], warned
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="notify_transport.precedence"):
        # the section says it: the attribute is not used, so nothing to warn about
        assert listener_gets(tmp_path, SERVE, (Source.SECTION, Source.ENDPOINT)) == value(Source.SECTION)
    assert not [r for r in caplog.records if "deprecated" in r.getMessage()]
