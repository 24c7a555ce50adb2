"""The session's warm-up: Spark's Python processes started ahead of a ``notify_kafka`` read."""
import logging

from notify_transport.pipeline.session import WARM_UP_FORMAT, warm_up


def test_warm_up_source_has_one_empty_input_partition_per_reader_task(spark):
    df = spark.read.format(WARM_UP_FORMAT).option("readerTasks", "3").load()
    assert df.columns == ["ready"]
    assert df.rdd.getNumPartitions() == 3
    assert df.collect() == []


def test_warm_up_runs_in_a_daemon_thread_that_finishes_without_error(spark, caplog):
    caplog.set_level(logging.DEBUG, logger="notify_transport.pipeline.session")
    thread = warm_up(spark)
    assert thread.daemon
    thread.join(120)
    assert not thread.is_alive()
    assert not [r for r in caplog.records if "Warming up" in r.getMessage()]


def test_reads_in_python_tells_which_processes_a_warm_up_starts(spark):
    from notify_transport.pipeline.reading import kafka_format_available, reads_in_python

    assert reads_in_python(spark, "notify_kafka")
    assert reads_in_python(spark, "auto") is not kafka_format_available(spark)
    if kafka_format_available(spark):
        assert not reads_in_python(spark, "kafka")


def test_a_connector_run_warms_up_only_the_decoders_workers(spark, caplog):
    """Spark's connector reads in the JVM: starting notify_kafka's planner and readers only took
    the cores its first tasks wanted (a run with 5,000 new records was a second or two slower)."""
    caplog.set_level(logging.DEBUG, logger="notify_transport.pipeline.session")
    thread = warm_up(spark, reads_in_python=False)
    thread.join(120)
    assert not thread.is_alive()
    assert not [r for r in caplog.records if "Warming up" in r.getMessage()]


def test_the_sessions_python_workers_import_the_installed_pyspark(spark):
    """Not the zipped copy Spark puts first on their path: that one they compile from source at
    every start (1.9 s against 0.4 s here, for each worker daemon and for the data-source lookup)."""
    import pyspark

    where = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()
    assert where == [pyspark.__file__]
