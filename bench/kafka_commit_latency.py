"""How long one synchronous offset commit takes on a freshly started Apache Kafka node.

The default delivery mode of notify-transport's Kafka listener commits every
polled batch before handing it out, so at a low rate a commit's round trip is
part of every notification's end-to-end latency. This measures that round
trip with confluent-kafka alone (no library code): one consumer in a group,
``rounds`` synchronous commits of increasing offsets, p50/p90/max in ms.
Broker settings given as ``key=value`` go to the node's configuration, e.g.
``group.coordinator.append.linger.ms=0`` to see what the group coordinator's
write batching costs.

    python -m bench.kafka_commit_latency
    python -m bench.kafka_commit_latency group.coordinator.append.linger.ms=0
"""
from __future__ import annotations

import argparse
import json
import uuid

from bench.stats import summarize_latencies


def measure(bootstrap: str, rounds: int = 100) -> dict:
    """Commit ``rounds`` offsets of a one-record topic synchronously, one after the other."""
    import time

    from confluent_kafka import Consumer, Producer, TopicPartition

    topic, group = f"commit-latency-{uuid.uuid4().hex[:8]}", f"commit-latency-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(topic, b"x")
    if producer.flush(30):
        raise RuntimeError(f"the record to {topic} was not confirmed within 30 s")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while consumer.poll(0.5) is None:  # joined the group and read the record: a coordinator exists
            if time.monotonic() > deadline:
                raise RuntimeError(f"no record read from {topic} within 60 s")
        latencies = []
        for offset in range(1, rounds + 1):
            start = time.perf_counter()
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            latencies.append(time.perf_counter() - start)
    finally:
        consumer.close()
    return summarize_latencies(latencies)


def _setting(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair; argparse reports anything else."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("broker_config", nargs="*", type=_setting, metavar="KEY=VALUE",
                        help="settings for the Apache Kafka node started for the measure")
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    config = dict(args.broker_config)
    from notify_transport.testing.apache_kafka import ApacheKafka

    kafka = ApacheKafka(broker_config=config).start()
    try:
        print(json.dumps({"broker_config": config, **measure(kafka.bootstrap, args.rounds)}))
    finally:
        kafka.close()


if __name__ == "__main__":
    main()
