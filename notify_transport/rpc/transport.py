"""``oslo_messaging.rpc.transport``: where oslo.messaging keeps ``get_rpc_transport``."""
from notify_transport.transport import get_rpc_transport

__all__ = ["get_rpc_transport"]
