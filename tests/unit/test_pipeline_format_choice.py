"""Choosing the pipeline's reader: resolved once per run, the classpath probed once."""
from __future__ import annotations

import pytest

from notify_transport.exceptions import ConfigurationError
from notify_transport.pipeline import reading
from notify_transport.pipeline.session import SMALL_RUN_RECORDS


class ProbedSession:
    """Just enough of a SparkSession for the connector probe: counts the streaming reads defined."""

    def __init__(self, connector: bool) -> None:
        self.connector = connector
        self.probes = 0

    @property
    def readStream(self):  # noqa: N802 - SparkSession's spelling
        session = self

        class Reader:
            def format(self, _name):
                return self

            def option(self, _key, _value):
                return self

            def load(self):
                from pyspark.errors import AnalysisException

                session.probes += 1
                if not session.connector:
                    raise AnalysisException("Failed to find data source: kafka")
                return object()
        return Reader()


@pytest.mark.parametrize("connector, asked, expected", [
    (True, "auto", "kafka"), (False, "auto", "notify_kafka"),
    (True, "kafka", "kafka"), (True, "notify_kafka", "notify_kafka"), (False, "notify_kafka", "notify_kafka"),
])
def test_a_chosen_format_is_not_probed_again(connector, asked, expected):
    spark = ProbedSession(connector)
    chosen = reading.choose_format(spark, asked)
    assert chosen == expected and isinstance(chosen, reading.ChosenFormat)
    probes = spark.probes
    assert probes == (0 if asked == "notify_kafka" else 1)
    assert reading.choose_format(spark, chosen) is chosen
    assert reading.reads_in_python(spark, chosen) is (expected == "notify_kafka")
    assert spark.probes == probes


def test_an_explicit_connector_without_its_jars_and_an_unknown_format_are_refused():
    with pytest.raises(ConfigurationError, match="is not set up") as refused:
        reading.choose_format(ProbedSession(connector=False), "kafka")
    assert "notify-transport pipeline setup" in refused.value.next_step
    with pytest.raises(ConfigurationError, match="Unknown source format 'jdbc'"):
        reading.choose_format(ProbedSession(connector=True), "jdbc")


@pytest.mark.parametrize("connector", [True, False])
@pytest.mark.parametrize("backlog", [0, 5000, SMALL_RUN_RECORDS])
def test_auto_reads_a_run_known_to_be_small_with_notify_kafka(connector, backlog):
    spark = ProbedSession(connector)
    assert reading.choose_format(spark, "auto", backlog) == "notify_kafka"
    assert spark.probes == 0  # the connector is not even looked for


@pytest.mark.parametrize("backlog", [None, SMALL_RUN_RECORDS + 1])
def test_auto_reads_a_large_or_unknown_run_with_the_connector_when_it_is_set_up(backlog):
    assert reading.choose_format(ProbedSession(connector=True), "auto", backlog) == "kafka"
    assert reading.choose_format(ProbedSession(connector=False), "auto", backlog) == "notify_kafka"


@pytest.mark.parametrize("asked", ["kafka", "notify_kafka"])
def test_a_reader_asked_by_name_is_kept_whatever_the_backlog(asked):
    assert reading.choose_format(ProbedSession(connector=True), asked, 10) == asked


@pytest.mark.parametrize("asked, backlog, expected", [
    ("notify_kafka", None, "notify_kafka"), ("kafka", 10, "kafka"), ("auto", 5000, "notify_kafka"),
    ("auto", SMALL_RUN_RECORDS + 1, None), ("auto", None, None),
])
def test_the_reader_is_known_before_the_session_where_no_probe_is_needed(asked, backlog, expected):
    assert reading.format_before_session(asked, backlog) == expected
    if expected is not None:  # the session's choice agrees, without a probe
        spark = ProbedSession(connector=True)
        assert reading.choose_format(spark, asked, backlog) == expected
        assert spark.probes == (1 if expected == "kafka" else 0)


class SessionNotStarted(Exception):
    """Stops the command where the session would start."""


@pytest.mark.parametrize("asked, backlog, jars", [
    ("auto", 5000, False), ("notify_kafka", None, False), ("auto", None, True), ("kafka", 5000, True),
])
def test_a_run_read_by_notify_kafka_starts_spark_without_the_jvm_readers_jars(monkeypatch, asked, backlog, jars):
    import argparse

    from notify_transport.cli import pipeline_cmd
    from notify_transport.pipeline import session
    from notify_transport.pipeline.run_config import PipelineConfig

    asked_for = {}

    def build_session(*_args, **kwargs):
        asked_for.update(kwargs)
        raise SessionNotStarted

    monkeypatch.setattr(session, "build_session", build_session)
    args = argparse.Namespace(spark_conf=[], debug=True, master="local[2]", shuffle_partitions=2, once=True,
                              max_seconds=None, report=False, quiet=False)
    with pytest.raises(SessionNotStarted):
        pipeline_cmd._run_spark(args, None, None, PipelineConfig(output="/tmp/out", source_format=asked), backlog)
    assert asked_for["kafka_connector"] is jars and asked_for["jvm_decoder"] is jars
