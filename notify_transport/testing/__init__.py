"""Helpers for users' tests: Kafka-protocol brokers started on 127.0.0.1."""
from notify_transport.testing.brokers import (BOOTSTRAP_ENV, Broker, BrokerNotInstalled, BrokerStartError,
                                              ExternalKafka, NoidaBroker, TansuBroker, broker_answers,
                                              external_kafka, free_port, kafka_url)

__all__ = ["BOOTSTRAP_ENV", "Broker", "BrokerNotInstalled", "BrokerStartError", "ExternalKafka", "NoidaBroker",
           "TansuBroker", "broker_answers", "external_kafka", "free_port", "kafka_url"]
