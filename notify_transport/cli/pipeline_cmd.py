"""``notify-transport pipeline run|report``: the Spark notification pipeline and its report.

PySpark is imported only when a command runs, so the CLI's help works without
the ``spark`` extra.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from notify_transport.cli import common, contract
from notify_transport.cli.ops import args as cli_args
from notify_transport.drivers.naming import PRIORITIES
from notify_transport.exceptions import ConfigurationError

LOG = logging.getLogger(__name__)


def _csv_list(value: str) -> list[str]:
    return list(_csv(value))


#: The extra the pipeline needs, and the modules it brings.
EXTRA, EXTRA_MODULES = "spark", ("pyspark", "matplotlib", "jinja2")

DESCRIPTION = """\
'pipeline run' reads notifications from Kafka (a kafka:// transport URL, vhost
included) into OUTPUT/archive, OUTPUT/errors and OUTPUT/stats; --once processes
what is there and stops (Trigger.AvailableNow), otherwise it runs until
interrupted. 'pipeline report' writes OUTPUT/report/index.html with charts,
without Spark.

Needs the spark extra: pip install 'notify-transport[spark]'. Progress lines
(batches, records, rate) are logged at INFO; Spark's and the JVM's own lines
are shown with --debug only (without it they go to
~/.cache/notify-transport/logs/spark-driver.log).

exit status: 0 done, 1 a streaming query failed, 2 bad input or configuration
(a missing extra or connector, a bad URL or option), 3 the Kafka brokers did
not answer within --connect-timeout"""

RUN_EXAMPLES = """\
examples:
  notify-transport pipeline run --transport-url kafka://127.0.0.1:9092/prod --output /var/lib/nt/out --once
  notify-transport pipeline run --transport-url kafka://127.0.0.1:9092 --output /var/lib/nt/out --once \\
      --report --priority error,critical
  notify-transport pipeline run --config-file /etc/nova/nova.conf --output /var/lib/nt/out \\
      --trigger-interval 1m"""

REPORT_DESCRIPTION = """\
Write OUTPUT/report/index.html from the outputs of 'pipeline run': one file, its
charts inside it, which names its source and covers the whole period of the
statistics. Needs no Spark.

exit status: 0 written, 2 bad input (OUTPUT holds no pipeline output, a missing
extra)"""

REPORT_EXAMPLES = """\
examples:
  notify-transport pipeline report --output /var/lib/nt/out
  notify-transport pipeline report --output /var/lib/nt/out --report-dir /srv/www/nt --title 'Region one'"""


def _summary(text: str) -> str:
    """A subcommand's one-line summary, saying how to install the extra when it is missing."""
    if common.missing_modules(EXTRA_MODULES):
        text += f" (needs: pip install 'notify-transport[{EXTRA}]')"
    return text


def add_run_parser(sub: Any) -> argparse.ArgumentParser:
    """``pipeline run``: its arguments on the parser ``sub.add_parser`` gives."""
    run_parser = sub.add_parser("pipeline run", help=_summary("Spark pipeline: run the archive and statistics jobs"),
                                description=DESCRIPTION, epilog=RUN_EXAMPLES)
    cli_args.add_connection_args(run_parser)
    src = run_parser.add_argument_group("what to read")
    src.add_argument("--topic", "--topics", dest="topics", action="extend", type=_csv_list,
                     metavar="TOPIC[,...]",
                     help="notifier topic (as [oslo_messaging_notifications] topics), may repeat; the "
                          "Kafka topics read are TOPIC.PRIORITY plus .VHOST when the URL has one "
                          "(default: notifications)")
    src.add_argument("--priority", "--priorities", dest="priorities", action="extend",
                     type=cli_args.priority_list, metavar="PRIORITY[,...]",
                     help="priorities to read, may repeat (default: all)")
    src.add_argument("--all-vhosts", action="store_true",
                     help="read the topics of every vhost (and of none), not only the URL's")
    src.add_argument("--kafka-topics", metavar="T[,T...]",
                     help="exact Kafka topic names to read instead of --topics/--priorities")
    src.add_argument("--starting-offsets", default="earliest",
                     help="where a new query starts: earliest, latest or JSON "
                          '{"topic": {"0": offset}} (default: earliest)')
    src.add_argument("--max-records-per-trigger", type=int, metavar="N",
                     help="cap each micro-batch at N records: the oldest by broker time across the "
                          "partitions, with either reader")
    src.add_argument("--source", default="auto", choices=("auto", "notify_kafka", "kafka"),
                     help="Kafka reader. auto: the notify_kafka Python data source for a run known to "
                          "read at most 100,000 records (it ends sooner), else Spark's Kafka connector when "
                          "the set-up fetched it, else notify_kafka. Both write the same outputs and "
                          "continue one checkpoint (default: auto)")
    src.add_argument("--no-fail-on-data-loss", action="store_true",
                     help="log and skip offsets deleted before they were read instead of failing")
    out = run_parser.add_argument_group("outputs")
    out.add_argument("--output", required=True, metavar="DIR",
                     help="output folder or URI: archive/, errors/, stats/ (and report/)")
    out.add_argument("--checkpoint", metavar="DIR",
                     help="checkpoint folder or URI (default: OUTPUT/_checkpoints); keep it to "
                          "resume where the last run stopped")
    out.add_argument("--jobs", default="archive,stats", metavar="J[,J...]",
                     help="jobs to run: archive, stats (default: both)")
    out.add_argument("--report", action="store_true", help="build the HTML report when the run ends")
    when = run_parser.add_argument_group("when")
    mode = when.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true",
                      help="process everything available now, then stop (Trigger.AvailableNow); "
                           "when nothing is new since the last run, exit without starting Spark")
    mode.add_argument("--continuous", action="store_true",
                      help="run until interrupted (the default)")
    when.add_argument("--trigger-interval", default="10 seconds",
                      help="micro-batch interval when continuous (default: '10 seconds')")
    when.add_argument("--max-seconds", type=float, metavar="S",
                      help="stop a continuous run after S seconds")
    stats = run_parser.add_argument_group("statistics and deduplication")
    stats.add_argument("--window", default="1 minute", help="statistics window (default: '1 minute')")
    stats.add_argument("--lateness", default="10 minutes",
                       help="a notification whose timestamp is more than this behind the newest "
                            "notification before it in its own Kafka partition is late: archived, "
                            "counted apart, left out of the windows' counts (default: '10 minutes')")
    stats.add_argument("--dedup-horizon", default="24 hours",
                       help="how long (processing time) the pipeline remembers a message_id to drop "
                            "its duplicates; the copy kept is the first by broker time "
                            "(default: '24 hours')")
    spark = run_parser.add_argument_group("spark")
    spark.add_argument("--master", default=None,
                       help="Spark master, e.g. spark://host:7077 or yarn (default: local[2])")
    spark.add_argument("--shuffle-partitions", type=int, default=2, metavar="N",
                       help="spark.sql.shuffle.partitions (default: 2)")
    spark.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                       help="extra Spark setting (may repeat)")
    run_parser.set_defaults(func=run, pipeline_command="run")
    return run_parser


SETUP_DESCRIPTION = """\
Fetch Spark's Kafka connector (spark-sql-kafka-0-10) at the installed PySpark's
version from Maven Central with Maven, and build the pipeline's decoder in the
JVM with javac, into the jar cache (~/.cache/notify-transport/jvm). Run it once
per machine and PySpark version; 'pipeline run' then reads with the connector
(--source auto). A second run finds everything cached and changes nothing.

exit status: 0 set up, 1 Maven could not fetch the connector, 2 a missing extra"""

SETUP_EXAMPLES = """\
examples:
  notify-transport pipeline setup
  notify-transport pipeline setup --spark-version 4.2.0"""


def add_setup_parser(sub: Any) -> argparse.ArgumentParser:
    """``pipeline setup``: its arguments on the parser ``sub.add_parser`` gives."""
    setup_parser = sub.add_parser("pipeline setup",
                                  help=_summary("Spark pipeline: fetch Spark's Kafka connector and build "
                                                "the JVM decoder"),
                                  description=SETUP_DESCRIPTION, epilog=SETUP_EXAMPLES)
    setup_parser.add_argument("--spark-version", metavar="VERSION", default=None,
                              help="the Spark release whose connector to fetch (default: the installed "
                                   "PySpark's, the only one its sessions load)")
    setup_parser.set_defaults(func=run, pipeline_command="setup")
    return setup_parser


def add_report_parser(sub: Any) -> argparse.ArgumentParser:
    """``pipeline report``: its arguments on the parser ``sub.add_parser`` gives."""
    report_parser = sub.add_parser("pipeline report",
                                   help=_summary("Spark pipeline: build the HTML report from the job outputs"),
                                   description=REPORT_DESCRIPTION, epilog=REPORT_EXAMPLES)
    report_parser.add_argument("--output", required=True, metavar="DIR",
                               help="the pipeline's output folder")
    report_parser.add_argument("--report-dir", metavar="DIR", help="default: OUTPUT/report")
    report_parser.add_argument("--title", default="Notification bus report")
    report_parser.set_defaults(func=run, pipeline_command="report")
    return report_parser


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def _spark_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"--spark-conf expects KEY=VALUE, got {pair!r}")
        conf[key.strip()] = value.strip()
    return conf


def run(args: argparse.Namespace) -> int:
    """Dispatch ``pipeline run`` / ``pipeline report``; return the exit code."""
    if args.pipeline_command in ("run", "report", "setup"):
        common.require_extra(EXTRA, EXTRA_MODULES, f"'pipeline {args.pipeline_command}'")
    if args.pipeline_command == "report":
        return _report(args)
    if args.pipeline_command == "setup":
        return _setup(args)
    if args.pipeline_command == "run":
        return _run(args)
    raise ConfigurationError("choose a pipeline command: run or report")


def _setup(args: argparse.Namespace) -> int:
    from notify_transport.jvm.artifacts import JvmArtifactsError, cache_root
    from notify_transport.pipeline import connector, jvm_decoder

    version = args.spark_version or connector.pyspark_version()
    try:
        jars = connector.set_up(version)
    except JvmArtifactsError as exc:
        raise contract.CommandError(contract.FAILED, f"Spark {version}'s Kafka connector: {exc}",
                                    "check that Maven (mvn) is installed and reaches Maven Central") from None
    print(f"Spark {version}'s Kafka connector: {len(jars)} jar(s) in {cache_root()}")
    try:
        print(f"the pipeline's decoder in the JVM: {jvm_decoder.build(jvm_decoder.sources())}")
    except JvmArtifactsError as exc:  # optional: the Arrow UDF decodes by default
        print(f"notify-transport: warning: the decoder in the JVM was not built ({exc}); the pipeline "
              "decodes with its Arrow UDF, as by default", file=sys.stderr)
    return 0


def _report(args: argparse.Namespace) -> int:
    from notify_transport.pipeline.report import build_report

    if not any((Path(args.output) / part).is_dir() for part in ("stats", "archive", "errors")):
        raise contract.CommandError(contract.MISSING_FILE, f"{args.output} holds no pipeline output "
                                    "(no stats, archive or errors folder)",
                                    "give the --output of a 'notify-transport pipeline run'")
    index = build_report(args.output, args.report_dir, args.title)
    print(f"Report: {index}")
    return 0


def _run(args: argparse.Namespace) -> int:
    # Spark is imported only once there is something to read: a run with nothing new starts no JVM.
    started = time.monotonic()
    from notify_transport.pipeline import caught_up, run_config
    from notify_transport.pipeline.kafka_settings import KafkaSettings
    from notify_transport.url import TransportURL
    from notify_transport.pipeline.topics import Subscription

    conf = common.load_conf(args)
    url = common.required_url(args, conf)
    parsed = TransportURL.parse(conf, url)
    if parsed.transport != "kafka":
        raise common.not_kafka(parsed, "the pipeline")
    settings = KafkaSettings.from_url(parsed, conf)
    subscription = Subscription(base_topics=tuple(dict.fromkeys(args.topics or ["notifications"])),
                                vhost=settings.vhost,
                                priorities=tuple(dict.fromkeys(args.priorities or PRIORITIES)),
                                all_vhosts=args.all_vhosts,
                                kafka_topics=_csv(args.kafka_topics))
    if args.source == "kafka":  # said before any JVM starts: the connector's jars are in the cache or not
        from notify_transport.pipeline import connector

        if connector.connector_jars() is None and "spark.jars.packages" not in " ".join(args.spark_conf or []):
            raise connector.ConnectorNotSetUp(connector.pyspark_version())
    if args.max_records_per_trigger is not None and args.max_records_per_trigger <= 0:
        raise ConfigurationError("--max-records-per-trigger must be positive")
    output = run_config.default_output(args.output)
    config = run_config.PipelineConfig(
        output=output, checkpoint=run_config.default_output(args.checkpoint) if args.checkpoint else None,
        jobs=_csv(args.jobs), window=args.window, lateness=args.lateness,
        dedup_horizon=args.dedup_horizon, trigger_interval=args.trigger_interval,
        source_format=args.source, starting_offsets=args.starting_offsets,
        max_per_trigger=args.max_records_per_trigger,
        fail_on_data_loss=not args.no_fail_on_data_loss)
    if "://" not in output:  # the report names the cluster and the subscription of a local output
        from notify_transport.pipeline.report import write_source

        write_source(output, settings.describe()["url"],
                     {"topics": list(subscription.base_topics), "priorities": list(subscription.priorities),
                      "vhost": subscription.vhost, "all_vhosts": subscription.all_vhosts,
                      "kafka_topics": list(subscription.kafka_topics)})
    if not args.once:  # a continuous run reads for as long as it runs: no size to know
        return _run_spark(args, settings, subscription, config, None)
    kafka_config = settings.librdkafka_config()
    backlog = caught_up.waiting(config.checkpoint_root, kafka_config, subscription, args.connect_timeout)
    if backlog == 0:
        _show_progress(run_config.PROGRESS_LOG, args)
        run_config.PROGRESS_LOG.info("Nothing new since the last run: Spark not started")
        summary = run_config.RunSummary.empty(time.monotonic() - started)
        print(json.dumps({"output": output, **summary.as_dict()}, indent=2))
        return _maybe_report(args, output)
    if backlog is None:  # a first run (or a remote checkpoint) still starts Spark, sized by what Kafka holds
        backlog = caught_up.held(kafka_config, subscription, args.connect_timeout)
    return _run_spark(args, settings, subscription, config, backlog)


def _run_spark(args: argparse.Namespace, settings, subscription, config, backlog: int | None = None) -> int:
    from pyspark.errors import StreamingQueryException

    from notify_transport.pipeline import jobs
    from notify_transport.pipeline.reading import choose_format, format_before_session
    from notify_transport.pipeline.source import FORMAT_NAME
    from notify_transport.pipeline.session import build_session, jvm_log_path, run_conf, small_run, warm_up

    output = config.output
    log_level = "INFO" if LOG.isEnabledFor(logging.DEBUG) else "ERROR"
    _show_progress(jobs.PROGRESS_LOG, args)
    extra_conf = {**run_conf(backlog), **_spark_conf(args.spark_conf)}  # the user's settings win
    # Spark's and the JVM's own lines: on stderr with --debug, else in a file an error names
    jvm_log = None if args.debug else jvm_log_path()
    jvm_reader = format_before_session(config.source_format, backlog) != FORMAT_NAME
    spark = build_session(args.master, shuffle_partitions=args.shuffle_partitions,
                          extra_conf=extra_conf, log_level=log_level, quick_start=small_run(backlog),
                          jvm_log=jvm_log, kafka_connector=jvm_reader, jvm_decoder=jvm_reader)
    # resolved once: the query's read takes this format without probing the classpath again
    config = dataclasses.replace(config, source_format=choose_format(spark, config.source_format, backlog))
    # the Python processes the read needs start while the query starts
    warming = warm_up(spark, config.source_format == FORMAT_NAME)
    LOG.info("Pipeline on %s: %s -> %s", spark.sparkContext.master, settings.describe(), output)
    stop = threading.Event()
    restore = None if args.once else _stop_on_signals(stop)
    try:
        summary = jobs.run(spark, settings, subscription, config, once=args.once,
                           max_seconds=args.max_seconds, stop=stop)
    except StreamingQueryException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise contract.CommandError(contract.FAILED, f"a streaming query failed: {first}",
                                    f"Spark's own account of it is in {jvm_log}" if jvm_log else
                                    "the lines above are Spark's own account of it") from None
    finally:
        if restore is not None:
            restore()
        warming.join()
    print(json.dumps({"output": output, **summary.as_dict()}, indent=2))
    return _maybe_report(args, output)


def _stop_on_signals(stop: threading.Event) -> Callable[[], None] | None:
    """SIGINT and SIGTERM set ``stop`` (the pipeline ends after the micro-batch under way);
    returns what puts the previous handlers back. Only the main thread may set handlers."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, _frame: Any) -> None:
        LOG.info("Signal %d: stopping the pipeline after the current micro-batch", signum)
        stop.set()

    for sig in previous:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)
    return restore


def _show_progress(progress: logging.Logger, args: argparse.Namespace) -> None:
    if not progress.isEnabledFor(logging.INFO) and not args.quiet:  # shown without -v, hidden by -q
        progress.setLevel(logging.INFO)


def _maybe_report(args: argparse.Namespace, output: str) -> int:
    if args.report and "://" not in output:
        from notify_transport.pipeline.report import build_report

        print(f"Report: {build_report(output)}")
    elif args.report:
        print("Report skipped: the output is not a local folder; run 'pipeline report' where it is "
              "readable", file=sys.stderr)
    return 0
