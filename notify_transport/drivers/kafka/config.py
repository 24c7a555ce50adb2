"""Former name of :mod:`notify_transport.drivers.kafka.client_properties`.

Kept only for ``notify_transport/pipeline/kafka_settings.py`` while the
pipeline is rewritten elsewhere; it imports these two names. Remove this
module once the pipeline imports :mod:`.client_properties`.
"""
from notify_transport.drivers.kafka.client_properties import common_config, sasl_credentials

__all__ = ["common_config", "sasl_credentials"]
