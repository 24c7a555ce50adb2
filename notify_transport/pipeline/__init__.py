"""The notification data pipeline on Apache Spark (install with the ``spark`` extra).

Kafka -> oslo envelopes decoded into typed columns -> a deduplicated Parquet
archive, windowed statistics, and an HTML report built from those outputs.

Modules, in data-flow order:

- :mod:`.topics`, :mod:`.kafka_settings`: which Kafka topics and how to connect
  (transport URL, vhost, SASL/SSL), without Spark.
- :mod:`.run_config`: what a run writes where, and its summary, without Spark.
- :mod:`.caught_up`: whether a run has anything to read, without Spark.
- :mod:`.offsets`: offset ranges and the per-trigger cut on broker time, without Spark.
- :mod:`.kafka_io`, :mod:`.source`: the ``notify_kafka`` PySpark data source, on the
  driver's group-less reader.
- :mod:`.connector`: Spark's Kafka connector's jars (fetched by the set-up) on the session's
  ``spark.jars``.
- :mod:`.reading`: the source DataFrame, from ``notify_kafka`` or Spark's ``kafka``.
- :mod:`.decode`: oslo envelopes to columns, in an Arrow UDF.
- :mod:`.dedup`: which copy of a duplicate is kept, across micro-batches and runs.
- :mod:`.jobs`: the one streaming query; each micro-batch to the archive and the statistics.
- :mod:`.sink`, :mod:`.hadoop_fs`: idempotent per-batch writes, through Hadoop's FileSystem.
- :mod:`.lateness`: lateness judged against each partition's own progress.
- :mod:`.delays`, :mod:`.stats_files`: additive delay histograms, which statistics files
  count (no Spark); durations are parsed and shown by :mod:`notify_transport.times`.
- :mod:`.report`, :mod:`.report_page`: charts and the Jinja2 page from the outputs, without Spark.
- :mod:`.session`: a SparkSession set up for the pipeline.

Importing this package does not import PySpark; the submodules that need it do.
"""
