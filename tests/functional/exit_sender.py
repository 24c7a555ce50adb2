"""Sends notifications and exits WITHOUT cleaning up; run as a child process by test_exit_flush.py.

``python exit_sender.py API MODE URL TOPIC COUNT [--gc] [--cleanup-at-exit]``

* API ``nt``: notify_transport's public API; ``oslo``: oslo.messaging's
  (``get_notification_transport`` on the global ``cfg.CONF``, whose options
  oslo registers only there, then ``Notifier``), as an OpenStack service does.
  The oslo child configures logging, as services do; the nt child leaves it
  alone, as a plain script does (records then reach stderr through logging's
  last-resort handler).
* MODE ``eventlet`` monkey-patches first thing and keeps a green thread
  running, as a service's are, when the main thread exits; ``threaded`` does
  not.
* ``--gc``: the transport and notifier are dropped and garbage collected
  before exit.
* ``--cleanup-at-exit``: the script's own exit hook, registered before the
  transport exists (so it runs after notify-transport's), cleans up the
  transport: a second cleanup after the exit flush.

Sends COUNT notifications ``{"seq": n}`` at info priority to TOPIC, prints
``sent`` on stdout and returns; what was sent must reach the broker all the
same.
"""
import sys

if sys.argv[2] == "eventlet":
    import eventlet

    eventlet.monkey_patch()

import atexit  # noqa: E402
import gc  # noqa: E402
import logging  # noqa: E402
from typing import Any  # noqa: E402


def transport_and_notifier(api: str, url: str, topic: str) -> tuple[Any, Any]:
    if api == "oslo":
        import oslo_messaging
        from oslo_config import cfg

        cfg.CONF([], project="exit-sender")
        transport = oslo_messaging.get_notification_transport(cfg.CONF, url=url)
        return transport, oslo_messaging.Notifier(transport, publisher_id="exit.sender",
                                                  driver="messagingv2", topics=[topic])
    import notify_transport
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    conf([])
    transport = notify_transport.get_notification_transport(conf, url)
    return transport, notify_transport.Notifier(transport, publisher_id="exit.sender",
                                                driver="messagingv2", topics=[topic])


def send(api: str, url: str, topic: str, count: int, holder: list) -> None:
    transport, notifier = transport_and_notifier(api, url, topic)
    holder.append(transport)
    for seq in range(count):
        notifier.info({}, "exit.test", {"seq": seq})


def tick() -> None:
    """A service's green thread, still running at exit."""
    while True:
        eventlet.sleep(0.01)


def main(argv: list[str]) -> int:
    api, mode, url, topic, count = argv[:5]
    flags = set(argv[5:])
    if api == "oslo":
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    holder: list = []
    if mode == "eventlet":
        eventlet.spawn(tick)
    if "--cleanup-at-exit" in flags:
        atexit.register(lambda: [transport.cleanup() for transport in holder])
    send(api, url, topic, int(count), holder)
    if "--gc" in flags:
        holder.clear()
        gc.collect()
    print("sent", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
