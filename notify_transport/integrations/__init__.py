"""Adapters that let other messaging libraries use notify-transport's drivers.

:mod:`.oslo_messaging` registers the Kafka driver with oslo.messaging (scheme
``ntkafka``), so a service that keeps oslo.messaging gets this project's Kafka
driver by changing the scheme of its notification ``transport_url``.
"""
