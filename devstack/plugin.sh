#!/bin/bash
#
# notify-transport devstack plugin: dispatches devstack's phases to the
# functions in lib/ (settings: see ``settings`` and README.md).
#
#   [[local|localrc]]
#   enable_plugin notify-transport <git url of this repository> main
#   enable_service nt-serve    # optional: run `notify-transport serve`
#
# - lib/notify-transport  installs the package (setup_develop), checks settings
# - lib/transport-url     builds the URLs; takes over devstack's messaging
#                         hooks when the "kafka" service is enabled
# - lib/kafka             the local Kafka broker (unless KAFKA_EXTERNAL=True)
# - lib/nt-serve          the "nt-serve" service

# Save trace setting
_XTRACE_NT_PLUGIN=$(set +o | grep xtrace)
set +o xtrace

NOTIFY_TRANSPORT_PLUGIN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$NOTIFY_TRANSPORT_PLUGIN_DIR/lib/transport-url"
source "$NOTIFY_TRANSPORT_PLUGIN_DIR/lib/notify-transport"
source "$NOTIFY_TRANSPORT_PLUGIN_DIR/lib/kafka"
source "$NOTIFY_TRANSPORT_PLUGIN_DIR/lib/nt-serve"

# Services are configured (iniset_rpc_backend) between the install and
# post-config phases: the hooks are in place whenever this file is sourced.
if is_service_enabled kafka; then
    notify_transport_take_over_messaging_hooks
elif [[ "${RPC_SCHEME:-rabbit}" != "rabbit" ]]; then
    notify_transport_take_over_rpc_url_hook
fi

if [[ "${1:-}" == "stack" && "${2:-}" == "pre-install" ]]; then
    check_notify_transport_settings

elif [[ "${1:-}" == "stack" && "${2:-}" == "install" ]]; then
    check_notify_transport_settings
    install_notify_transport
    if notify_transport_kafka_is_local; then
        install_kafka
        # stack.sh starts keystone between this phase and post-config, and the
        # services' notifications go to Kafka: the broker runs from here on.
        configure_kafka
        start_kafka
    fi

elif [[ "${1:-}" == "stack" && "${2:-}" == "post-config" ]]; then
    configure_rabbit_vhosts
    if is_service_enabled nt-serve; then
        configure_nt_serve
    fi

elif [[ "${1:-}" == "stack" && "${2:-}" == "extra" ]]; then
    check_notify_transport
    if is_service_enabled nt-serve; then
        start_nt_serve
    fi

elif [[ "${1:-}" == "unstack" ]]; then
    if is_service_enabled nt-serve; then
        stop_nt_serve
    fi
    if notify_transport_kafka_is_local; then
        stop_kafka
    fi

elif [[ "${1:-}" == "clean" ]]; then
    # clean.sh runs unstack.sh first.
    if is_service_enabled nt-serve; then
        cleanup_nt_serve
    fi
    if notify_transport_kafka_is_local; then
        cleanup_kafka
    fi
fi

# Restore xtrace
$_XTRACE_NT_PLUGIN

## Local variables:
## mode: shell-script
## End:
