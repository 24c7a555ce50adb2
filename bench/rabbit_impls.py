"""The ways a benchmark does RPC and notifications over RabbitMQ.

``ours``: notify-transport's public API on ``rabbit://``. ``oslo``:
oslo.messaging 18.3.1's rabbit driver through the global ``cfg.CONF`` with its
defaults. ``ntrabbit``: the same oslo.messaging service code with only the
scheme changed to ``ntrabbit://`` (our driver under oslo's API). ``raw``:
pika's BlockingConnection (direct reply-to for calls, publisher confirms for
casts and notifications), the limit.

``RabbitParams`` travels to workers as a plain dict.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any, Callable

from bench.payload import EVENT_TYPE, PUBLISHER_ID

RAW_EXCHANGE = "openstack"   # the same exchange name oslo.messaging uses by default


def pika_params(rabbit: dict) -> Any:
    import pika

    return pika.ConnectionParameters(
        host=rabbit["host"], port=rabbit["port"], virtual_host=rabbit["vhost"],
        credentials=pika.PlainCredentials(rabbit["user"], rabbit["password"]),
        heartbeat=60)


def ntrabbit_url(url: str) -> str:
    """The ``rabbit://`` URL with only its scheme changed: oslo's API on our driver."""
    if not url.startswith("rabbit://"):
        raise ValueError(f"not a rabbit:// URL: {url.split('@')[-1]}")
    return "nt" + url


def _oslo_conf() -> Any:
    from bench.kafka_impls import _oslo_conf as conf
    return conf()


def _ours_conf() -> Any:
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    conf([])
    return conf


class BenchEndpoint:
    """RPC methods: ``echo`` returns its argument, ``bump`` counts casts, ``count`` reports."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.casts = 0
        self.last_cast = 0.0

    def echo(self, ctxt: Any, value: Any) -> Any:
        return value

    def bump(self, ctxt: Any, value: Any) -> None:
        with self._lock:
            self.casts += 1
            self.last_cast = time.time()

    def count(self, ctxt: Any) -> dict:
        with self._lock:
            return {"casts": self.casts, "last": self.last_cast}

    def dispatch(self, method: str, kwargs: dict) -> Any:
        """Used by the raw pika server."""
        if method not in ("echo", "bump", "count"):
            raise ValueError(f"no method {method!r}")
        return getattr(self, method)(None, **kwargs)


# -- RPC servers --------------------------------------------------------------------

class RpcServer:
    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class OursRpcServer(RpcServer):
    def __init__(self, url: str, topic: str, server: str) -> None:
        import notify_transport as nt

        self.transport = nt.get_rpc_transport(_ours_conf(), url)
        self.server = nt.get_rpc_server(self.transport, nt.Target(topic=topic, server=server),
                                        [BenchEndpoint()], executor="threading")

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()
        self.server.wait()
        self.transport.cleanup()


class OsloRpcServer(RpcServer):
    def __init__(self, url: str, topic: str, server: str) -> None:
        import oslo_messaging

        self.transport = oslo_messaging.get_rpc_transport(_oslo_conf(), url)
        self.server = oslo_messaging.get_rpc_server(
            self.transport, oslo_messaging.Target(topic=topic, server=server), [BenchEndpoint()],
            executor="threading")

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()
        self.server.wait()
        self.transport.cleanup()


class RawRpcServer(RpcServer):
    """A pika consumer on one queue answering to ``reply_to`` with the correlation id."""

    def __init__(self, rabbit: dict, topic: str, server: str) -> None:
        self.rabbit = rabbit
        self.queue = f"{topic}.raw"
        self.endpoint = BenchEndpoint()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise TimeoutError(f"raw RPC server not ready: {self._error}")

    def _run(self) -> None:
        import pika

        try:
            conn = pika.BlockingConnection(pika_params(self.rabbit))
            ch = conn.channel()
            ch.queue_declare(self.queue, auto_delete=True)
            ch.basic_qos(prefetch_count=100)

            def on_request(channel: Any, method: Any, props: Any, body: bytes) -> None:
                request = json.loads(body)
                result = self.endpoint.dispatch(request["method"], request.get("args", {}))
                if props.reply_to:
                    channel.basic_publish(
                        "", props.reply_to, json.dumps({"result": result}).encode(),
                        pika.BasicProperties(correlation_id=props.correlation_id))
                channel.basic_ack(method.delivery_tag)

            ch.basic_consume(self.queue, on_request)
        except BaseException as exc:
            self._error = exc
            raise
        self._ready.set()
        while not self._stop.is_set():
            conn.process_data_events(time_limit=0.2)
        conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def make_rpc_server(impl: str, url: str, rabbit: dict, topic: str, server: str) -> RpcServer:
    if impl == "ours":
        return OursRpcServer(url, topic, server)
    if impl == "oslo":
        return OsloRpcServer(url, topic, server)
    if impl == "ntrabbit":
        return OsloRpcServer(ntrabbit_url(url), topic, server)
    if impl == "raw":
        return RawRpcServer(rabbit, topic, server)
    raise ValueError(f"unknown implementation {impl!r}")


# -- RPC clients --------------------------------------------------------------------

class RpcClient:
    """``call(method, **kwargs)`` and ``cast(method, **kwargs)``; one per thread for raw."""

    def call(self, method: str, **kwargs: Any) -> Any:
        raise NotImplementedError

    def cast(self, method: str, **kwargs: Any) -> None:
        raise NotImplementedError

    def for_thread(self) -> "RpcClient":
        """A client usable from another thread (the same one when thread-safe)."""
        return self

    def close(self) -> None:
        pass


RPC_CONTEXT = {"request_id": "req-0b6f1a2c-3d4e-4f50-8a6b-7c8d9e0f1a2b",
               "user_id": "5a9b6c0e4f2d4c1b9e3f7a8d6c5b4a31",
               "project_id": "8d1c2e3f4a5b6c7d8e9f0a1b2c3d4e5f"}


class OursRpcClient(RpcClient):
    def __init__(self, url: str, topic: str, timeout: float) -> None:
        import notify_transport as nt

        self.transport = nt.get_rpc_transport(_ours_conf(), url)
        self.client = nt.get_rpc_client(self.transport, nt.Target(topic=topic), timeout=timeout)

    def call(self, method: str, **kwargs: Any) -> Any:
        return self.client.call(RPC_CONTEXT, method, **kwargs)

    def cast(self, method: str, **kwargs: Any) -> None:
        self.client.cast(RPC_CONTEXT, method, **kwargs)

    def close(self) -> None:
        self.transport.cleanup()


class OsloRpcClient(RpcClient):
    def __init__(self, url: str, topic: str, timeout: float) -> None:
        import oslo_messaging

        self.transport = oslo_messaging.get_rpc_transport(_oslo_conf(), url)
        self.client = oslo_messaging.get_rpc_client(self.transport, oslo_messaging.Target(topic=topic),
                                                    timeout=timeout)

    def call(self, method: str, **kwargs: Any) -> Any:
        return self.client.call(RPC_CONTEXT, method, **kwargs)

    def cast(self, method: str, **kwargs: Any) -> None:
        self.client.cast(RPC_CONTEXT, method, **kwargs)

    def close(self) -> None:
        self.transport.cleanup()


class RawRpcClient(RpcClient):
    """pika, direct reply-to for calls, publisher confirms for casts; not thread-safe."""

    def __init__(self, rabbit: dict, topic: str, timeout: float) -> None:
        import pika

        self._pika = pika
        self.rabbit, self.topic, self.timeout = rabbit, topic, timeout
        self.queue = f"{topic}.raw"
        self.conn = pika.BlockingConnection(pika_params(rabbit))
        self.call_ch = self.conn.channel()
        self.call_ch.basic_consume("amq.rabbitmq.reply-to", self._on_reply, auto_ack=True)
        self.cast_ch = self.conn.channel()
        self.cast_ch.confirm_delivery()
        self._replies: dict[str, bytes] = {}

    def _on_reply(self, _ch: Any, _method: Any, props: Any, body: bytes) -> None:
        self._replies[props.correlation_id] = body

    def call(self, method: str, **kwargs: Any) -> Any:
        corr = uuid.uuid4().hex
        body = json.dumps({"method": method, "args": kwargs, "context": RPC_CONTEXT}).encode()
        self.call_ch.basic_publish("", self.queue, body, self._pika.BasicProperties(
            reply_to="amq.rabbitmq.reply-to", correlation_id=corr))
        deadline = time.monotonic() + self.timeout
        while corr not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"raw call {method} timed out")
            self.conn.process_data_events(time_limit=left)
        return json.loads(self._replies.pop(corr))["result"]

    def cast(self, method: str, **kwargs: Any) -> None:
        body = json.dumps({"method": method, "args": kwargs, "context": RPC_CONTEXT}).encode()
        self.cast_ch.basic_publish("", self.queue, body)  # returns once confirmed

    def for_thread(self) -> "RpcClient":
        return RawRpcClient(self.rabbit, self.topic, self.timeout)

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:
            pass


def make_rpc_client(impl: str, url: str, rabbit: dict, topic: str, timeout: float) -> RpcClient:
    if impl == "ours":
        return OursRpcClient(url, topic, timeout)
    if impl == "oslo":
        return OsloRpcClient(url, topic, timeout)
    if impl == "ntrabbit":
        return OsloRpcClient(ntrabbit_url(url), topic, timeout)
    if impl == "raw":
        return RawRpcClient(rabbit, topic, timeout)
    raise ValueError(f"unknown implementation {impl!r}")


# -- notifications over rabbit -------------------------------------------------------

OnCount = Callable[[int, float], None]


class OursRabbitNotify:
    def __init__(self, url: str, topic_base: str, ctxt: Any) -> None:
        import notify_transport as nt

        self._nt = nt
        self.transport = nt.get_notification_transport(_ours_conf(), url)
        self.topic_base, self.ctxt = topic_base, ctxt
        self.notifier = nt.Notifier(self.transport, PUBLISHER_ID, driver="messagingv2",
                                    topics=[topic_base])

    def send(self, payload: dict) -> None:
        self.notifier.info(self.ctxt, EVENT_TYPE, payload)

    def flush(self) -> None:
        pending = self.transport.flush(60)
        if pending:
            raise RuntimeError(f"{pending} notifications unconfirmed after 60 s")

    def listen(self, on_count: OnCount) -> Any:
        nt = self._nt

        class Endpoint:
            def info(self, ctxt: Any, publisher_id: str, event_type: str, payload: dict,
                     metadata: dict) -> None:
                on_count(1, time.time())

        server = nt.get_notification_listener(self.transport, [nt.Target(topic=self.topic_base)],
                                              [Endpoint()])
        server.start()
        return server

    def close(self) -> None:
        self.transport.cleanup()


class OsloRabbitNotify:
    def __init__(self, url: str, topic_base: str, ctxt: Any) -> None:
        import oslo_messaging

        self._om = oslo_messaging
        self.transport = oslo_messaging.get_notification_transport(_oslo_conf(), url)
        self.topic_base, self.ctxt = topic_base, ctxt
        self.notifier = oslo_messaging.Notifier(self.transport, PUBLISHER_ID, driver="messagingv2",
                                                topics=[topic_base])

    def send(self, payload: dict) -> None:
        self.notifier.info(self.ctxt, EVENT_TYPE, payload)  # synchronous publish

    def flush(self) -> None:
        pass

    def listen(self, on_count: OnCount) -> Any:
        om = self._om

        class Endpoint:
            def info(self, ctxt: Any, publisher_id: str, event_type: str, payload: dict,
                     metadata: dict) -> None:
                on_count(1, time.time())

        server = om.get_notification_listener(self.transport, [om.Target(topic=self.topic_base)],
                                              [Endpoint()], executor="threading")
        server.start()
        return server

    def close(self) -> None:
        self.transport.cleanup()


class RawRabbitNotify:
    """pika with publisher confirms into the queue oslo's layout would use."""

    def __init__(self, rabbit: dict, topic_base: str, ctxt: Any) -> None:
        import pika

        from bench.payload import context_dict

        self.rabbit = rabbit
        self.conn = pika.BlockingConnection(pika_params(rabbit))
        self.ch = self.conn.channel()
        self.ch.exchange_declare(RAW_EXCHANGE, "topic")
        self.queue = f"{topic_base}.info"
        self.ch.queue_declare(self.queue)
        self.ch.queue_bind(self.queue, RAW_EXCHANGE, self.queue)
        self.ch.confirm_delivery()
        self.ctxt = {f"_context_{k}": v for k, v in context_dict(ctxt).items()}
        self._body: bytes | None = None

    def send(self, payload: dict) -> None:
        if self._body is None:
            from bench.payload import make_message

            msg = make_message(payload)
            msg.update(self.ctxt)
            self._body = json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(msg)}).encode()
        self.ch.basic_publish(RAW_EXCHANGE, self.queue, self._body)

    def flush(self) -> None:
        pass

    def listen(self, on_count: OnCount) -> Any:
        import pika

        stop = threading.Event()
        ready = threading.Event()

        def run() -> None:
            conn = pika.BlockingConnection(pika_params(self.rabbit))
            ch = conn.channel()
            ch.basic_qos(prefetch_count=1000)
            pending = [0, 0]   # unacknowledged count, last delivery tag

            def on_msg(channel: Any, method: Any, _props: Any, _body: bytes) -> None:
                on_count(1, time.time())
                pending[0] += 1
                pending[1] = method.delivery_tag
                if pending[0] >= 100:
                    channel.basic_ack(method.delivery_tag, multiple=True)
                    pending[0] = 0

            ch.basic_consume(self.queue, on_msg)
            ready.set()
            while not stop.is_set():
                conn.process_data_events(time_limit=0.1)
            if pending[0]:
                ch.basic_ack(pending[1], multiple=True)
            conn.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        ready.wait(30)

        class Handle:
            def stop(self) -> None:
                stop.set()

            def wait(self) -> None:
                thread.join(10)

        return Handle()

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:
            pass


def make_rabbit_notify(impl: str, url: str, rabbit: dict, topic_base: str, ctxt: Any) -> Any:
    if impl == "ours":
        return OursRabbitNotify(url, topic_base, ctxt)
    if impl == "oslo":
        return OsloRabbitNotify(url, topic_base, ctxt)
    if impl == "raw":
        return RawRabbitNotify(rabbit, topic_base, ctxt)
    raise ValueError(f"unknown implementation {impl!r}")
