"""A key in notify-transport's groups of a config file that no option takes is named, not skipped
silently as oslo.config does."""
from __future__ import annotations

import logging
from pathlib import Path

from oslo_config import cfg

import notify_transport as nt
from notify_transport.options import ignored_file_options

CONF_TEXT = """\
[DEFAULT]
some_other_project_option = 1

[oslo_messaging_kafka]
producer_batch_timout = 1
producer_batch_timeout = 2
kafka-max-fetch-bytes = 1024

[oslo_messaging_rabbit]
kombu_reconnect_timeout = 5
rabbit_qos_prefetch_count = 10
entirely_unlike_anything = x

[nova_group]
whatever = 1
"""


def _conf(tmp_path: Path, text: str = CONF_TEXT, in_dir: bool = False) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    if in_dir:
        folder = tmp_path / "conf.d"
        folder.mkdir()
        (folder / "10-service.conf").write_text(text)
        conf(args=[], default_config_files=[], default_config_dirs=[str(folder)])
    else:
        path = tmp_path / "service.conf"
        path.write_text(text)
        conf(args=[], default_config_files=[str(path)])
    return conf


def test_misspelt_and_unknown_keys_of_our_groups_are_named(tmp_path: Path) -> None:
    found = ignored_file_options(_conf(tmp_path))
    assert len(found) == 2, found
    typo, unknown = found
    assert typo.endswith("[oslo_messaging_kafka] producer_batch_timout is not an option of notify-transport "
                         "and is ignored (did you mean producer_batch_timeout?)")
    assert "[oslo_messaging_rabbit] entirely_unlike_anything is not an option" in unknown
    assert "did you mean" not in unknown
    # options, dashed spellings and deprecated names are options; [DEFAULT] and other groups are not ours


def test_the_files_of_a_config_dir_are_read_too(tmp_path: Path) -> None:
    found = ignored_file_options(_conf(tmp_path, in_dir=True))
    assert [line.split(": ", 1)[0].endswith("10-service.conf") for line in found] == [True, True]


def test_no_files_no_lines(tmp_path: Path) -> None:
    conf = cfg.ConfigOpts()
    assert ignored_file_options(conf) == []  # never called: no files
    conf([])
    assert ignored_file_options(conf) == []


def test_a_transport_logs_each_ignored_key(tmp_path: Path, caplog) -> None:
    conf = _conf(tmp_path, "[oslo_messaging_notifications]\ntopic = x\n")
    with caplog.at_level(logging.WARNING, logger="notify_transport"):
        nt.get_notification_transport(conf, "fake://").cleanup()
    lines = [r.getMessage() for r in caplog.records if "is not an option" in r.getMessage()]
    assert len(lines) == 1
    assert "[oslo_messaging_notifications] topic" in lines[0] and "(did you mean topics?)" in lines[0]


def test_each_ignored_key_is_logged_once_for_many_transports(tmp_path: Path, caplog) -> None:
    # before: serve's probe and its service transport (and a service's RPC and notification
    # transports, and each serve worker) logged the same warning again
    conf = _conf(tmp_path, "[oslo_messaging_notifications]\ntopic = x\n")
    with caplog.at_level(logging.WARNING, logger="notify_transport"):
        for _ in range(3):
            nt.get_notification_transport(conf, "fake://").cleanup()
    lines = [r.getMessage() for r in caplog.records if "is not an option" in r.getMessage()]
    assert len(lines) == 1 and "[oslo_messaging_notifications] topic" in lines[0]
