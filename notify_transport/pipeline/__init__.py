"""The notification data pipeline on Apache Spark (install with the ``spark`` extra).

Kafka -> oslo envelopes decoded into typed columns -> a deduplicated Parquet archive,
windowed statistics, and an HTML report built from those outputs. The modules that
only plan (topics, settings, offsets, run configuration, the report) work without
Spark; importing this package does not import PySpark, the submodules that need it do.
"""
