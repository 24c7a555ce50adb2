"""Public types importable from public places; version and type hints shipped from one source."""
from __future__ import annotations

import configparser
import re
from importlib import metadata
from pathlib import Path

import notify_transport
import notify_transport.kafka as public_kafka
from notify_transport.drivers.kafka import driver, positions
from notify_transport.reading import of_transport, reader
from notify_transport.drivers.kafka.delivery import hooks
from notify_transport.notify import CountersLog
from notify_transport.notify.counters_log import CountersLog as DeepCountersLog

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "doc" / "source"


def test_kafka_types_are_the_driver_and_reader_objects_re_exported() -> None:
    expected = {
        "ListenerHooks": hooks.ListenerHooks, "DeadLetter": hooks.DeadLetter,
        "MessageId": positions.MessageId, "StartPosition": positions.StartPosition,
        "parse_start_position": positions.parse_start_position, "KINDS": positions.KINDS,
        "PartitionConsumer": reader.PartitionConsumer, "PartitionIterator": reader.PartitionIterator,
        "MergedIterator": reader.MergedIterator, "Record": reader.Record, "merge": reader.merge,
        "Reader": reader.Reader, "partition_consumer": of_transport.partition_consumer,
        "read_topic": of_transport.read_topic, "open_reader": of_transport.open_reader,
        "KafkaDriver": driver.KafkaDriver,
    }
    assert sorted(public_kafka.__all__) == sorted(expected)
    for name, obj in expected.items():
        assert getattr(public_kafka, name) is obj, name
    assert CountersLog is DeepCountersLog


def test_public_position_types_work_from_the_public_place() -> None:
    assert public_kafka.parse_start_position("offset:7") == public_kafka.StartPosition("offset", 7)
    assert str(public_kafka.MessageId("t", 1, 2)) == "t[1]@2"


def test_docs_import_from_public_places_only() -> None:
    """Code in the docs never imports from driver internals (``notify_transport.drivers...``)."""
    deep = re.compile(r"(from|import)\s+notify_transport\.drivers\b|~?notify_transport\.drivers\.kafka\.")
    offenders = []
    for path in [*DOC.glob("*.rst"), ROOT / "README.md"]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if deep.search(line):
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_version_comes_from_the_package_metadata() -> None:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    assert notify_transport.__version__ == metadata.version("notify-transport")
    assert notify_transport.__version__ == parser.get("metadata", "version")
    conf_py = (DOC / "conf.py").read_text()
    assert 'metadata.version("notify-transport")' in conf_py
    assert parser.get("metadata", "version") not in conf_py  # no hard-coded copy


def test_type_hints_are_shipped() -> None:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    assert "py.typed" in parser.get("options.package_data", "notify_transport")
    assert (ROOT / "notify_transport" / "py.typed").is_file()
