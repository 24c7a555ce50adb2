"""``notify-transport serve [NAME ...]``: run the listeners registered through entry points.

Loads the listeners that packages declare in the ``notify_transport.listeners``
entry point group (all of them, or the NAMEs given) and runs them in this
process on the configured notification transport. The first SIGTERM or SIGINT
stops them gracefully (work in flight finishes, offsets are committed) within
--stop-timeout; a second one stops at once. ``--list`` shows what is
registered instead.

Exit status: 0 after a graceful stop (or a clean --list); 1 when a listener
entry is broken, a listener fails to start, or the graceful stop ran out of
time; 2 for an unknown NAME or no configured transport; 128+N after an
abrupt stop by a second signal N.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any, Sequence

from notify_transport.cli.common import configured_url, load_conf
from notify_transport.cli.ops.args import positive_float
from notify_transport.cli.ops.output import emit
from notify_transport.listeners import (BrokenListenerError, EntryPointListener, UnknownListenerError,
                                        load_listeners, registered_entries, stop_servers)
from notify_transport.notify.counters_log import CountersLog
from notify_transport.notify.listener import NotificationServer
from notify_transport.transport import get_notification_transport

DESCRIPTION = """\
Loads the listeners that packages declare in the notify_transport.listeners
entry point group (all of them, or the NAMEs given) and runs them in this
process on the configured notification transport. The first SIGTERM or SIGINT
stops them gracefully (work in flight finishes, offsets are committed) within
--stop-timeout; a second one stops at once. --list shows what is registered
instead.

exit status: 0 after a graceful stop (or a clean --list), 1 a listener entry is
broken, a listener fails to start or the graceful stop ran out of time, 2 an
unknown NAME or no configured transport, 128+N after an abrupt stop by a second
signal N"""

LOG = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
#: Seconds an abrupt stop (second signal) and the final transport cleanup may take.
ABRUPT_GRACE = 3.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the listeners registered through entry points",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="listeners to run (entry point names); default: every registered one")
    p.add_argument("--list", action="store_true",
                   help="print the registered listeners (name, distribution, topics, pool) and exit")
    p.add_argument("--skip-broken", action="store_true",
                   help="run the listeners that load and start, reporting the others, instead "
                        "of refusing to start")
    p.add_argument("--stats-interval", type=positive_float, default=60.0, metavar="SECONDS",
                   help="seconds between the per-listener counter lines in the log (default 60)")
    p.add_argument("--stop-timeout", type=positive_float, default=30.0, metavar="SECONDS",
                   help="seconds a graceful stop may take to drain and commit (default 30)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _log_info_by_default()
    conf = load_conf(args)
    if args.list:
        return _list(conf, args)
    url = configured_url(args, conf)
    if not url:
        return _error("no notification transport configured: give --transport-url, a --config-file "
                      "with [oslo_messaging_notifications] transport_url, or NOTIFY_TRANSPORT_URL", EXIT_USAGE)
    try:
        listeners, _broken = load_listeners(conf, args.names, skip_broken=args.skip_broken)
    except UnknownListenerError as exc:
        return _error(str(exc), EXIT_USAGE)
    except BrokenListenerError as exc:
        return _error(str(exc), EXIT_FAILURE)
    if not listeners:
        return _error("no listener to run", EXIT_FAILURE)
    transport = get_notification_transport(conf, url)
    service = _Service(transport, listeners, args)
    try:
        return service.run()
    finally:
        # the listeners are closed by now: this flushes and closes the (idle) producer and admin client
        _bounded(transport.cleanup, ABRUPT_GRACE if service.abrupt else ABRUPT_GRACE + 10.0,
                 "closing the transport")


def _error(message: str, code: int) -> int:
    print(f"notify-transport serve: error: {message}", file=sys.stderr)
    return code


def _log_info_by_default() -> None:
    """A service logs its start, counters and stop even without -v."""
    for name in (__name__, "notify_transport.notify.counters_log"):
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)


#: The columns of ``serve --list`` (cliff's -c takes these names).
LIST_HEADERS = ("NAME", "DISTRIBUTION", "TOPICS", "POOL", "DELIVERY", "ENTRY POINT")


def _list(conf: Any, args: argparse.Namespace) -> int:
    try:
        listeners, broken = load_listeners(conf, args.names, skip_broken=True)
    except UnknownListenerError as exc:
        return _error(str(exc), EXIT_USAGE)
    rows = [(lst.name, lst.entry.distribution, ",".join(lst.topics), lst.pool,
             lst.driver_options.get("delivery_mode", "default"), lst.entry.value) for lst in listeners]
    rows += [(b.entry.name, b.entry.distribution, "-", "-", "-", f"BROKEN: {b.error}") for b in broken]
    if not rows and not registered_entries():
        print("no listener registered in entry point group notify_transport.listeners")
        return EXIT_OK
    emit(args, LIST_HEADERS, sorted(rows))
    return EXIT_FAILURE if broken else EXIT_OK


def _bounded(work: Any, timeout: float, what: str) -> bool:
    """Run ``work()`` in a daemon thread for at most ``timeout`` seconds."""
    thread = threading.Thread(target=work, daemon=True, name=what)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        LOG.warning("%s is taking more than %.0fs; leaving it", what, timeout)
        return False
    return True


class _Service:
    """The running listeners, the counters log and the signal handling of one ``serve``."""

    def __init__(self, transport: Any, listeners: list[EntryPointListener], args: argparse.Namespace) -> None:
        self.transport = transport
        self.listeners = {lst.name: lst for lst in listeners}
        self.args = args
        self.servers: dict[str, NotificationServer] = {}
        self._signals: list[int] = []
        self._stop = threading.Event()
        #: set when a second signal cut the graceful stop short
        self.abrupt = False

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals.append(signum)
        self._stop.set()
        if len(self._signals) >= 2:  # a third signal gets the default action: die
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            if not self._start_all():
                stop_servers(self.servers.values(), graceful=True, timeout=self.args.stop_timeout)
                return EXIT_FAILURE
            counters = CountersLog(self.servers, self.args.stats_interval).start()
            while not self._stop.wait(0.5):
                pass
            counters.stop()
            code = self._stop_all()
            counters.report()
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
        LOG.info("serving %d listener(s) on %s; SIGTERM or SIGINT stops them", len(self.servers),
                 self.transport.url.redacted())
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
