"""Functional test fixtures: brokers started once per session, fresh config per test.

Each broker family keeps its fixtures in its own module, imported here, so the
sections below stay independent.
"""
# -- Kafka-protocol brokers (noida-db, Tansu, external cluster) -----------------
# noida, own_noida, tansu, own_tansu, external, kafka_bootstrap, kafka_conf, unique_topic, kafka_driver,
# raw_producer, collectors; helpers kafka_url(), Collector
from kafka_fixtures import *  # noqa: F401,F403

# -- RabbitMQ (the machine's service on 127.0.0.1:5672) --------------------------
# rabbit, rabbit_admin, unique, own_vhost, fresh_conf, transports, servers, tls_proxy;
# helpers wait_for(), tls_url(), TlsProxy
from rabbit_fixtures import *  # noqa: F401,F403

# -- a RabbitMQ cluster of three nodes of the tests' own ---------------------------
# rabbit_cluster, cluster_transports; helpers node_back(), nodes_holding_connections(), CLUSTER_QUERY
from rabbit_cluster_fixtures import *  # noqa: F401,F403
