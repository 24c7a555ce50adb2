"""``notify-transport serve [NAME ...]``: run the listeners registered through entry points.

Runs them as an OpenStack service: ``--config-file``, oslo.log, ``--workers N``
processes watched and restarted by cotyledon; SIGTERM/SIGINT stop gracefully,
SIGHUP reloads the mutable options. Signals and exit statuses are in
doc/source/listeners.rst.
"""
from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
import urllib.parse
from typing import Any

import cotyledon
from cotyledon import types as cotyledon_types
from oslo_config import cfg
from oslo_log import log as oslo_log

from notify_transport.cli.common import check_broker, load_conf, required_url
from notify_transport.cli.contract import FAILED, NOT_FOUND, CommandError
from notify_transport.cli import contract
from notify_transport.cli.ops.args import add_connection_args, positive_float, positive_int
from notify_transport.cli.ops.output import emit
from notify_transport.drivers.config import register_opts
from notify_transport.drivers.kafka import GROUP as KAFKA_GROUP, all_opts as kafka_opts
from notify_transport.listeners import (NAMESPACE, BrokenEntry, BrokenListenerError, EntryPointListener,
                                        UnknownListenerError, load_listeners, log_skipped, registered_entries,
                                        stop_servers)
from notify_transport.notify.counters_log import CountersLog
from notify_transport.notify.listener import NotificationServer
from notify_transport.server import run_bounded
from notify_transport.options import SERVE_GROUP, register_serve_opts
from notify_transport.transport import get_notification_transport

DESCRIPTION = """\
Loads the listeners that packages declare in the notify_transport.listeners
entry point group (all of them, or the NAMEs given) and runs them on the
configured notification transport, as an OpenStack service: configured by
--config-file ([serve] and oslo.log's [DEFAULT] debug, log_file, log_dir,
log_config_append, use_journal, use_json), logging through oslo.log.

--workers N runs N processes of the same listeners, each a member of the same
pools (consumer groups); a master process starts them, restarts one that dies
and stops them all on SIGTERM. The first SIGTERM or SIGINT stops the listeners
gracefully (work in flight finishes, offsets are committed) within
--stop-timeout; with one worker, a second one stops at once. SIGHUP reloads
the mutable options ([serve] stats_interval and stop_timeout, [DEFAULT] debug).
--list lists what is registered instead.

exit status: 0 after a graceful stop (or a clean --list), 1 a listener entry is
broken, an unknown NAME, no listener registered, a listener fails to start or
the graceful stop ran out of time, 2 bad input or configuration (no configured
transport), 3 broker unreachable, 128+N after an abrupt stop by a second signal N"""

EXAMPLES = """\
examples:
  notify-transport serve --list
  notify-transport serve --config-file /etc/notify-transport/nt-serve.conf --workers 2
  notify-transport serve billing audit --transport-url kafka://127.0.0.1:9092/prod --skip-broken"""

LOG = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILURE = contract.OK_STATUS, contract.FAILED.status
#: Seconds an abrupt stop (second signal) and the final transport cleanup may take.
ABRUPT_GRACE = 3.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the listeners registered through entry points",
                       description=DESCRIPTION, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="listeners to run (entry point names); default: every registered one")
    p.add_argument("--list", action="store_true",
                   help="print the registered listeners (name, distribution, topics, pool) and exit")
    p.add_argument("--skip-broken", action="store_true",
                   help="run the listeners that load and start, reporting the others, instead "
                        "of refusing to start")
    add_connection_args(p)
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="processes running the listeners (default: [serve] workers, 1)")
    p.add_argument("--stats-interval", type=positive_float, default=None, metavar="SECONDS",
                   help="seconds between the per-listener counter lines in the log "
                        "(default: [serve] stats_interval, 60)")
    p.add_argument("--stop-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="seconds a graceful stop may take to drain and commit "
                        "(default: [serve] stop_timeout, 30)")
    p.set_defaults(func=run)


def _register(conf: cfg.ConfigOpts) -> None:
    """oslo.log's options (also command-line ones: registered before parsing) and ``[serve]``."""
    oslo_log.register_options(conf)
    register_serve_opts(conf)


def run(args: argparse.Namespace) -> int:
    conf = load_conf(args, register=_register)
    if args.list:
        return _list(conf, args)
    url = required_url(args, conf)
    with get_notification_transport(conf, url) as probe:  # an outage or a refused login: one line now
        check_broker(probe, args.connect_timeout, args.debug)
    try:
        listeners, broken = load_listeners(conf, args.names, skip_broken=args.skip_broken)
    except UnknownListenerError as exc:
        raise _unknown(exc) from None
    except BrokenListenerError as exc:
        raise _broken(exc.broken, "nothing started",
                      "fix or uninstall them, or run the others with --skip-broken") from None
    if broken and not listeners:
        raise _broken(broken, "no other listener to run", "fix or uninstall them")
    log_skipped(broken)
    if not listeners:
        raise CommandError(NOT_FOUND, f"no listener registered in entry point group {NAMESPACE}",
                           "install a package that declares one (see the listeners guide)")
    _apply_flags(conf, args)
    oslo_log.setup(conf, "notify-transport")
    if conf[SERVE_GROUP].workers > 1:
        del listeners  # each worker loads its own, after the fork
        return _run_workers(conf, url, args)
    service = _Service(get_notification_transport(conf, _static_membership(conf, url, 0)), listeners,
                       _settings(conf, args), conf)
    return service.run_and_close()


def _apply_flags(conf: cfg.ConfigOpts, args: argparse.Namespace) -> None:
    """The command line wins over the config files (and over what SIGHUP reloads)."""
    for name in ("workers", "stats_interval", "stop_timeout"):
        if getattr(args, name, None) is not None:
            conf.set_override(name, getattr(args, name), SERVE_GROUP)
    if args.debug:
        conf.set_override("debug", True)


def _settings(conf: cfg.ConfigOpts, args: argparse.Namespace) -> argparse.Namespace:
    """What :class:`_Service` reads: the ``[serve]`` values and --skip-broken."""
    serve = conf[SERVE_GROUP]
    return argparse.Namespace(stats_interval=serve.stats_interval, stop_timeout=serve.stop_timeout,
                              skip_broken=args.skip_broken)


def _static_membership(conf: cfg.ConfigOpts, url: str, worker_id: int) -> str:
    """``url``, and for Kafka a group.instance.id of this worker's own (``[serve] static_membership``).

    A restarted worker joins with the id of the one it replaces and gets its
    partitions back at once (a broker keeps a member that died without
    leaving until its session times out; some never evict it).
    """
    if not conf[SERVE_GROUP].static_membership or urllib.parse.urlsplit(url).scheme != "kafka":
        return url
    register_opts(conf, kafka_opts(), KAFKA_GROUP)
    properties = dict(conf[KAFKA_GROUP].consumer_config or {})
    if "group.instance.id" in properties:
        return url  # the operator chose it
    if "consumer_config" in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query):
        LOG.warning("[serve] static_membership not applied: the transport URL sets consumer_config")
        return url
    prefix = conf[SERVE_GROUP].group_instance_prefix or f"notify-transport-serve.{socket.gethostname()}"
    properties["group.instance.id"] = f"{prefix}-{worker_id}"
    conf.set_override("consumer_config", properties, KAFKA_GROUP)
    return url


def _run_workers(conf: cfg.ConfigOpts, url: str, args: argparse.Namespace) -> int:
    """N worker processes under a cotyledon master: started, restarted when they die, stopped on SIGTERM."""
    serve = conf[SERVE_GROUP]
    manager = cotyledon.ServiceManager(graceful_shutdown_timeout=int(serve.stop_timeout + ABRUPT_GRACE + 10))
    manager.add(ListenerWorker, workers=serve.workers, args=(conf, url, args))
    manager.register_hooks(on_dead_worker=_dead_worker, on_reload=lambda: _reload_conf(conf))
    LOG.info("starting %d worker(s) of the listeners; SIGTERM stops them, SIGHUP reloads the mutable "
             "options", serve.workers)
    try:
        manager.run()
    except SystemExit as exc:  # cotyledon ends the master with sys.exit once the workers stopped
        code = exc.code if isinstance(exc.code, int) else EXIT_FAILURE
        if code == EXIT_OK:
            LOG.info("stopped: every worker stopped")
        return code
    return EXIT_OK


def _dead_worker(_service_id: Any, worker_id: int, exit_code: int) -> None:
    how = f"signal {signal.Signals(-exit_code).name}" if exit_code < 0 else f"exit status {exit_code}"
    LOG.warning("worker %d died (%s): starting it again", worker_id, how)


def _reload_conf(conf: cfg.ConfigOpts) -> None:
    """SIGHUP: read the config files again; mutable options (and oslo.log's debug) take effect."""
    conf.mutate_config_files()


class ListenerWorker(cotyledon.Service):
    """One worker process: the listeners on a transport of its own, stopped gracefully on SIGTERM."""

    name = "notify-transport serve worker"

    def __init__(self, worker_id: cotyledon_types.WorkerId, conf: cfg.ConfigOpts, url: str,
                 args: argparse.Namespace) -> None:
        super().__init__(worker_id)
        self.conf = conf
        self.url = url
        self.args = args
        self.service: _Service | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._done = threading.Event()
        self._code = EXIT_OK

    def run(self) -> None:
        try:
            listeners, _broken = load_listeners(self.conf, self.args.names, skip_broken=self.args.skip_broken)
            transport = get_notification_transport(self.conf, _static_membership(self.conf, self.url,
                                                                                 self.worker_id))
            with self._lock:
                self.service = _Service(transport, listeners, _settings(self.conf, self.args), self.conf,
                                        worker=self.worker_id)
                if self._stopping:
                    self.service.request_stop(signal.SIGTERM)
            self._code = self.service.run_and_close(signals=False)
        finally:
            self._done.set()
        if not self._stopping:  # ended on its own (a listener failed to start): the master restarts it
            raise SystemExit(self._code or EXIT_FAILURE)

    def terminate(self) -> None:
        with self._lock:
            self._stopping = True
            if self.service is not None:
                self.service.request_stop(signal.SIGTERM)
        self._done.wait()
        raise SystemExit(self._code)

    def reload(self) -> None:
        _reload_conf(self.conf)
        if self.service is not None:
            self.service.reload_settings(_settings(self.conf, self.args))


def _unknown(exc: UnknownListenerError) -> CommandError:
    return CommandError(NOT_FOUND, f"no listener named {', '.join(map(repr, exc.unknown))} in entry point "
                        f"group {NAMESPACE} (registered: {', '.join(exc.registered) or 'none'})",
                        "'notify-transport serve --list' describes the registered ones")


def _broken(broken: list[BrokenEntry], outcome: str, next_step: str) -> CommandError:
    """The contract's one line for listener entries that cannot load."""
    which = "; ".join(f"{b.entry.name!r} from {b.entry.distribution}: {b.error}" for b in broken)
    return CommandError(FAILED, f"{len(broken)} listener entry point(s) cannot load ({which}); {outcome}",
                        next_step)


#: The columns of ``serve --list`` (cliff's -c takes these names).
LIST_HEADERS = ("NAME", "DISTRIBUTION", "TOPICS", "POOL", "DELIVERY", "ENTRY POINT")


def _list(conf: Any, args: argparse.Namespace) -> int:
    try:
        listeners, broken = load_listeners(conf, args.names, skip_broken=True)
    except UnknownListenerError as exc:
        raise _unknown(exc) from None
    rows = [(lst.name, lst.entry.distribution, ",".join(lst.topics), lst.pool,
             lst.driver_options.get("delivery_mode", "default"), lst.entry.value) for lst in listeners]
    rows += [(b.entry.name, b.entry.distribution, "-", "-", "-", f"BROKEN: {b.error}") for b in broken]
    if not rows and not registered_entries():
        print("no listener registered in entry point group notify_transport.listeners")
        return EXIT_OK
    emit(args, LIST_HEADERS, sorted(rows))
    return EXIT_FAILURE if broken else EXIT_OK


def _bounded(work: Any, timeout: float, what: str) -> bool:
    """Run ``work()`` for at most ``timeout`` seconds (:func:`~notify_transport.server.run_bounded`)."""
    if run_bounded(work, timeout, what):
        return True
    LOG.warning("%s is taking more than %.0fs; leaving it", what, timeout)
    return False


class _Service:
    """The running listeners and the counters log of one ``serve`` process (or worker).

    In a process of its own (one worker), :meth:`run` also handles the
    signals; in a cotyledon worker, the worker calls :meth:`request_stop`
    and :meth:`reload_settings`.
    """

    def __init__(self, transport: Any, listeners: list[EntryPointListener], args: argparse.Namespace,
                 conf: cfg.ConfigOpts | None = None, worker: int | None = None) -> None:
        self.transport = transport
        self.listeners = {lst.name: lst for lst in listeners}
        self.args = args
        self.conf = conf
        self.worker = worker
        self.servers: dict[str, NotificationServer] = {}
        self._signals: list[int] = []
        self._stop = threading.Event()
        self._reload = threading.Event()
        self._counters: CountersLog | None = None
        #: set when a second signal cut the graceful stop short
        self.abrupt = False

    def request_stop(self, signum: int) -> None:
        """Stop gracefully (a second request: at once)."""
        self._signals.append(signum)
        self._stop.set()

    def reload_settings(self, settings: argparse.Namespace) -> None:
        """Take the reloaded ``[serve]`` values: the counters' interval, the stop timeout."""
        self.args.stats_interval = settings.stats_interval
        self.args.stop_timeout = settings.stop_timeout
        if self._counters is not None:
            self._counters.interval = settings.stats_interval
        LOG.info("options reloaded: stats_interval=%gs stop_timeout=%gs", settings.stats_interval,
                 settings.stop_timeout)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGHUP:
            self._reload.set()
            return
        self.request_stop(signum)
        if len(self._signals) >= 2:  # a third signal gets the default action: die
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)

    def run_and_close(self, signals: bool = True) -> int:
        """:meth:`run`, then close the transport (bounded)."""
        try:
            return self.run(signals)
        finally:
            # the listeners are closed by now: this flushes and closes the (idle) producer and admin client
            _bounded(self.transport.cleanup, ABRUPT_GRACE if self.abrupt else ABRUPT_GRACE + 10.0,
                     "closing the transport")

    def run(self, signals: bool = True) -> int:
        handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP) if signals else ()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in handled}
        try:
            if not self._start_all():
                stop_servers(self.servers.values(), graceful=True, timeout=self.args.stop_timeout)
                return EXIT_FAILURE
            self._counters = CountersLog(self.servers, self.args.stats_interval).start()
            while not self._stop.wait(0.5):
                if self._reload.is_set() and self.conf is not None:
                    self._reload.clear()
                    _reload_conf(self.conf)
                    self.reload_settings(_settings(self.conf, argparse.Namespace(
                        skip_broken=self.args.skip_broken)))
            self._counters.stop()
            code = self._stop_all()
            self._counters.report()
            return code
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _start_all(self) -> bool:
        """Start every listener at once (joining a consumer group takes a while); True if all run."""
        errors: dict[str, BaseException] = {}
        servers = {name: lst.server(self.transport) for name, lst in self.listeners.items()}

        def start(name: str, server: NotificationServer) -> None:
            try:
                server.start()
            except Exception as exc:  # noqa: BLE001 - reported with the listener's name
                errors[name] = exc

        threads = [threading.Thread(target=start, args=item, daemon=True, name=f"start-{item[0]}")
                   for item in servers.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for name, server in servers.items():
            if name in errors:
                continue
            self.servers[name] = server
            LOG.info("listener %s started: topics=%s pool=%s delivery_mode=%s (%s from %s)", name,
                     ",".join(self.listeners[name].topics), server.pool, self._delivery_mode(server),
                     self.listeners[name].entry.value, self.listeners[name].entry.distribution)
        for name, exc in sorted(errors.items()):
            LOG.error("listener %s failed to start: %s: %s", name, type(exc).__name__, exc)
        if errors and not self.args.skip_broken:
            LOG.error("%d of %d listener(s) failed to start: stopping (--skip-broken runs the others)",
                      len(errors), len(servers))
            return False
        if not self.servers:
            LOG.error("no listener could start")
            return False
        LOG.info("serving %d listener(s) on %s%s; SIGTERM or SIGINT stops them", len(self.servers),
                 self.transport.url.redacted(), "" if self.worker is None else f" (worker {self.worker})")
        return True

    def _delivery_mode(self, server: NotificationServer) -> str:
        settings = getattr(server.listener, "settings", None)
        mode = getattr(settings, "delivery_mode", None)
        return mode or f"{self.transport.url.transport} default"

    def _stop_all(self) -> int:
        """Graceful stop, bounded; a second signal meanwhile turns it into an abrupt one."""
        first = signal.Signals(self._signals[0]).name
        timeout = self.args.stop_timeout
        LOG.info("%s: stopping %d listener(s) gracefully (drain, final commit) within %.0fs; "
                 "signal again to stop at once", first, len(self.servers), timeout)
        outcome: list[bool] = []
        graceful = threading.Thread(
            target=lambda: outcome.append(stop_servers(self.servers.values(), True, timeout)),
            daemon=True, name="graceful-stop")
        graceful.start()
        while graceful.is_alive() and len(self._signals) < 2:
            graceful.join(0.2)
        if len(self._signals) >= 2:
            self.abrupt = True
            second = signal.Signals(self._signals[1])
            LOG.warning("%s again: stopping at once; work not finished is not committed", second.name)
            stop_servers(self.servers.values(), graceful=False, timeout=ABRUPT_GRACE)
            return 128 + int(second)
        if outcome and outcome[0]:
            LOG.info("stopped: every listener drained and committed")
            return EXIT_OK
        LOG.error("the graceful stop ran out of its %.0fs: work in flight was abandoned (with "
                  "delivery_mode=at_least_once it is delivered again)", timeout)
        return EXIT_FAILURE
