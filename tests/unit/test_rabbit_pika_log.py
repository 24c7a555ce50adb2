"""A connection attempt that fails is one line of ours, not pika's error lines as well (no broker:
a refused loopback port)."""
from __future__ import annotations

import logging
import threading

from oslo_config import cfg
from waits import wait_until

from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.rabbit import pika_log
from notify_transport.drivers.rabbit.connection import RabbitConnection
from notify_transport.drivers.rabbit.options import GROUP, all_opts
from notify_transport.drivers.rabbit.settings import RabbitSettings
from notify_transport.testing.brokers import free_port
from notify_transport.url import TransportURL


def _refused_connection() -> RabbitConnection:
    conf = cfg.ConfigOpts()
    conf([])
    parsed = TransportURL.parse(conf, f"rabbit://guest:guest@127.0.0.1:{free_port()}/")
    return RabbitConnection(RabbitSettings(parsed, resolve_options(conf, GROUP, all_opts(), parsed.query)), "send")


def test_a_refused_attempt_is_our_line_and_pikas_only_at_debug(caplog) -> None:
    # before: seven pika error lines per attempt (socket, connector, workflow, stack) beside ours
    connection = _refused_connection()
    with caplog.at_level(logging.DEBUG, logger="pika"), caplog.at_level(logging.DEBUG, logger="notify_transport"):
        connection.start()
        try:
            assert wait_until(lambda: connection.total_failures >= 1)
            assert wait_until(lambda: any(r.name.startswith("pika.") for r in caplog.records))
        finally:
            connection.close()
    ours = [r for r in caplog.records if r.name.endswith("rabbit.connection") and r.levelno == logging.ERROR]
    assert ours and "cannot connect to 127.0.0.1" in ours[0].getMessage()
    assert {r.levelno for r in caplog.records if r.name.startswith("pika.")} == {logging.DEBUG}


def test_pika_lines_of_other_threads_keep_their_level(caplog) -> None:
    pika_log.install()
    pika_log.install()  # once is enough; a second call adds no second filter
    logger = logging.getLogger(pika_log.PIKA_CONNECTION_LOGGERS[0])
    assert logger.filters.count(pika_log._FILTER) == 1

    def marked() -> None:
        pika_log.mark_io_thread()
        logger.error("from a connection of ours")

    with caplog.at_level(logging.INFO, logger="pika"):
        logger.error("from someone else's pika connection")
        thread = threading.Thread(target=marked)
        thread.start()
        thread.join()
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.ERROR, "from someone else's pika connection")]  # ours went to debug, which is off
