"""Options shared by subcommands: config files and the transport URL."""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
from typing import Iterator

from oslo_config import cfg

from notify_transport.options import NOTIFICATIONS_GROUP, register_notifier_opts, register_transport_opts

LOG = logging.getLogger(__name__)

#: Environment variable naming a transport URL when none is given otherwise.
URL_ENV = "NOTIFY_TRANSPORT_URL"


def add_transport_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-file", action="append", default=[], metavar="PATH",
                        help="oslo.config file(s) to read (may repeat)")
    parser.add_argument("--transport-url", metavar="URL",
                        help="e.g. kafka://host:9092/vhost; default: --config-file's "
                             f"notification transport_url, then ${URL_ENV}")


def load_conf(args: argparse.Namespace) -> cfg.ConfigOpts:
    """A fresh ConfigOpts reading the given config files."""
    conf = cfg.ConfigOpts()
    conf(args=[], project="notify-transport", default_config_files=list(args.config_file or []),
         default_config_dirs=[])
    register_transport_opts(conf)
    register_notifier_opts(conf)
    return conf


def configured_url(args: argparse.Namespace, conf: cfg.ConfigOpts) -> str | None:
    """The notification URL from the command line, the config files or the environment."""
    if args.transport_url:
        return args.transport_url
    if conf[NOTIFICATIONS_GROUP].transport_url:
        return conf[NOTIFICATIONS_GROUP].transport_url
    if args.config_file and "transport_url" in _set_in_files(conf):
        return conf.transport_url
    return os.environ.get(URL_ENV) or None


def _set_in_files(conf: cfg.ConfigOpts) -> set[str]:
    # [DEFAULT] transport_url defaults to rabbit://, which is not "configured"
    return {"transport_url"} if conf.transport_url != "rabbit://" else set()


@contextlib.contextmanager
def url_or_embedded_broker(args: argparse.Namespace, conf: cfg.ConfigOpts,
                           announce: bool = True) -> Iterator[str]:
    """Yield the configured URL, or start an embedded Kafka-protocol broker and yield its URL."""
    url = configured_url(args, conf)
    if url:
        yield url
        return
    try:
        from notify_transport.testing.brokers import NoidaBroker
    except ImportError as exc:  # pragma: no cover - the embedded extra
        raise SystemExit("No transport_url configured and the embedded broker is not installed: "
                         f"pip install 'notify-transport[embedded]' ({exc})")
    with NoidaBroker() as broker:
        if announce:
            print(f"No transport_url configured: started an embedded Kafka-protocol broker "
                  f"(noida-db) at {broker.bootstrap}")
        yield f"kafka://{broker.bootstrap}"
