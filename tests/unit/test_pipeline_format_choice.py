"""Choosing the pipeline's reader: resolved once per run, the classpath probed once."""
from __future__ import annotations

import pytest

from notify_transport.exceptions import ConfigurationError
from notify_transport.pipeline import reading


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
