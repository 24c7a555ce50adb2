"""What the subcommands share: the configuration, the transport URL, the extras they need."""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import logging
import os
from typing import Any, Callable, Iterator, Sequence

from oslo_config import cfg

from notify_transport.cli import logs
from notify_transport.cli.contract import (BAD_INPUT, FAILED, MISSING_EXTRA, MISSING_FILE, NOT_CONFIGURED,
                                           CommandError)
from notify_transport.exceptions import ConfigurationError
from notify_transport.options import NOTIFICATIONS_GROUP, register_notifier_opts, register_transport_opts

LOG = logging.getLogger(__name__)

#: Environment variable naming a transport URL when none is given otherwise.
URL_ENV = "NOTIFY_TRANSPORT_URL"
#: What to do about a config file oslo.config cannot parse (the error names the file and line).
PARSE_HINT = "fix that line: a config file is [group] headers, each followed by name = value lines"

__all__ = ["URL_ENV", "MissingExtra", "configured_url", "load_conf",
           "require_extra", "required_url", "url_or_embedded_broker"]


class MissingExtra(ConfigurationError):
    """A command needs the optional extra ``extra``, which is not installed (one line, exit status 2)."""

    def __init__(self, extra: str, message: str) -> None:
        super().__init__(message)
        self.extra = extra


def missing_modules(modules: Sequence[str]) -> list[str]:
    """The top-level modules of ``modules`` that cannot be imported here (without importing them)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require_extra(extra: str, modules: Sequence[str], what: str) -> None:
    """Raise :class:`MissingExtra` saying how to install ``extra`` when one of ``modules`` is missing."""
    missing = missing_modules(modules)
    if missing:
        raise MissingExtra(extra, f"{what} needs the {extra!r} extra ({', '.join(missing)} not installed)")


def load_conf(args: argparse.Namespace,
              register: Callable[[cfg.ConfigOpts], None] | None = None) -> cfg.ConfigOpts:
    """A fresh ConfigOpts reading --config-file then --config-dir; a file that cannot be read is one line.

    ``register`` registers options that must be known before the files are
    parsed (oslo.log's, which are also command-line options).
    """
    files = list(getattr(args, "config_file", None) or [])
    dirs = list(getattr(args, "config_dir", None) or [])
    for path in files:
        if not os.path.isfile(path):
            raise CommandError(MISSING_FILE, f"config file {path}: "
                               f"{'is a directory' if os.path.isdir(path) else 'no such file'}")
        if not os.access(path, os.R_OK):
            raise CommandError(MISSING_FILE, f"config file {path}: permission denied")
    for path in dirs:
        if not os.path.isdir(path):
            raise CommandError(MISSING_FILE, f"config dir {path}: no such directory")
    conf = cfg.ConfigOpts()
    if register is not None:
        register(conf)
    try:
        conf(args=[], project="notify-transport", default_config_files=files, default_config_dirs=dirs)
    except cfg.ConfigFileParseError as exc:
        raise CommandError(BAD_INPUT, str(exc), PARSE_HINT) from None
    except cfg.Error as exc:
        raise ConfigurationError(str(exc)) from None
    register_transport_opts(conf)
    register_notifier_opts(conf)
    return conf


def configured_url(args: argparse.Namespace, conf: cfg.ConfigOpts) -> str | None:
    """The notification URL from the command line, the config files or the environment."""
    if getattr(args, "transport_url", None):
        return args.transport_url
    if conf[NOTIFICATIONS_GROUP].transport_url:
        return conf[NOTIFICATIONS_GROUP].transport_url
    if (getattr(args, "config_file", None) or getattr(args, "config_dir", None)) \
            and "transport_url" in _set_in_files(conf):
        return conf.transport_url
    return os.environ.get(URL_ENV) or None


def check_broker(transport: Any, timeout: float, debug: bool = False) -> None:
    """Return once a broker of ``transport`` answers (``Transport.check_connection``).

    Its connection attempts' log lines are left out unless ``debug``: the
    exception of an outage or a refused login carries the cause for the one
    error line.
    """
    if debug:
        transport.check_connection(timeout)
        return
    with logs.HeldRecords("notify_transport.drivers"):
        transport.check_connection(timeout)


def required_url(args: argparse.Namespace, conf: cfg.ConfigOpts) -> str:
    """:func:`configured_url`, or the contract's "not configured" error when there is none."""
    url = configured_url(args, conf)
    if not url:
        raise CommandError(NOT_CONFIGURED, "no transport URL configured")
    return url


#: The next step of a command that works on Kafka only, given a URL of another driver.
KAFKA_URL_HINT = "give a kafka:// transport URL, such as kafka://HOST:9092/VHOST"


def not_kafka(url: Any, what: str) -> CommandError:
    """The error of ``what`` (a command) given ``url`` (a TransportURL) of a driver other than Kafka."""
    return CommandError(NOT_CONFIGURED, f"{what} works on Kafka only; {url.redacted()} uses the "
                        f"{url.transport!r} driver", KAFKA_URL_HINT)


def _set_in_files(conf: cfg.ConfigOpts) -> set[str]:
    # [DEFAULT] transport_url defaults to rabbit://, which is not "configured"
    return {"transport_url"} if conf.transport_url != "rabbit://" else set()


#: Brokers ``--broker`` can start when no transport URL is configured: noida-db (the embedded
#: default, a pip package) and Apache Kafka (one KRaft node; Java 17 and Maven, jars cached).
EMBEDDED_BROKERS = ("noida", "apache-kafka")


@contextlib.contextmanager
def url_or_embedded_broker(args: argparse.Namespace, conf: cfg.ConfigOpts,
                           announce: bool = True) -> Iterator[str]:
    """Yield the configured URL, or start a broker for the run (``args.broker``) and yield its URL."""
    url = configured_url(args, conf)
    if url:
        yield url
        return
    kind = getattr(args, "broker", None) or "noida"
    with contextlib.ExitStack() as stack:
        label, broker = _start_broker(kind, stack)
        if announce:
            print(f"No transport_url configured: started {label} at {broker.bootstrap}")
        yield f"kafka://{broker.bootstrap}"


#: The way out of any failure to start a broker for the run.
OWN_BROKER = "or give --transport-url of a running broker"


def _start_broker(kind: str, stack: contextlib.ExitStack) -> tuple[str, Any]:
    """Start the ``--broker`` the run gets when no URL is configured (stopped with ``stack``).

    What the machine lacks (the ``embedded`` extra, Java, Kafka's jars) is a missing piece, exit
    status 2, and says how to add it; a broker that fails to start is a failure.
    """
    from notify_transport.jvm.artifacts import JvmArtifactsError
    from notify_transport.testing.brokers import BrokerNotInstalled, BrokerStartError

    if kind == "apache-kafka":
        from notify_transport.testing.apache_kafka import ApacheKafka as Launcher
        label = "Apache Kafka (one KRaft node)"
    else:
        from notify_transport.testing.brokers import NoidaBroker as Launcher  # type: ignore[assignment]
        label = "an embedded Kafka-protocol broker (noida-db)"
    try:
        return label, stack.enter_context(Launcher())
    except BrokerNotInstalled as exc:
        raise CommandError(MISSING_EXTRA, f"no transport URL configured, and {label} cannot start: {exc.what}",
                           f"{exc.install}, {OWN_BROKER}") from None
    except JvmArtifactsError as exc:
        raise CommandError(MISSING_EXTRA, f"Apache Kafka's jars: {exc}",
                           f"python -m notify_transport.jvm fetch apache-kafka (needs Maven), {OWN_BROKER}") from None
    except BrokerStartError as exc:
        # the first line says why; the broker's log tail after it goes to the log (--debug)
        why, _, tail = str(exc).partition("\n")
        LOG.debug("The broker's log tail:\n%s", tail)
        raise CommandError(FAILED, f"could not start {label}: {why}", f"run again with --debug, {OWN_BROKER}") from None
