"""What Spark alone costs a scheduled pipeline run on this machine, now: the floor under ``pipeline run``.

    python bench/spark_floor.py [kafka|notify_kafka]

Starts the pipeline's own session the way a small scheduled run with that
reader does (:func:`notify_transport.pipeline.session.build_session` with the
quick-start JVM, the class-data-sharing archive, the connector's and the
decoder's jars for ``kafka`` only, the settings of
:func:`~notify_transport.pipeline.session.run_conf` for a known small
backlog), runs one job of one row, stops the session and exits. No
Kafka, no pipeline. ``bench_pipeline --phases cli`` times this process's wall
time right before each reader's incremental run, so that a run's time can be
read as this floor plus the pipeline's own share, on a machine whose speed
changes from hour to hour. Prints one JSON line: the session, the job and
the stop, in seconds, as this process saw them.
"""
from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    from notify_transport.pipeline.reading import format_before_session
    from notify_transport.pipeline.session import build_session, jvm_log_path, run_conf
    from notify_transport.pipeline.source import FORMAT_NAME

    # the session pipeline run starts for a small run (backlog 0) with this reader
    jvm_reader = format_before_session(argv[0] if argv else "kafka", 0) != FORMAT_NAME
    spark = build_session(extra_conf=run_conf(0), quick_start=True, jvm_log=jvm_log_path(),
                          kafka_connector=jvm_reader, jvm_decoder=jvm_reader)
    ready = time.perf_counter()
    spark.range(1).collect()
    ran = time.perf_counter()
    spark.stop()
    stopped = time.perf_counter()
    print(json.dumps({"session_seconds": round(ready - started, 3), "job_seconds": round(ran - ready, 3),
                      "stop_seconds": round(stopped - ran, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
