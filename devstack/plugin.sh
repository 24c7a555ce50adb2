#!/bin/bash
#
# notify-transport devstack plugin.
#
# Installs notify-transport and, when the "kafka" service is enabled (the
# default, see settings), a single-node Apache Kafka broker in KRaft mode. It
# replaces devstack's messaging hooks (iniset_rpc_backend, get_transport_url,
# get_notification_url) so that every service gets a hybrid configuration:
#
#   [DEFAULT] transport_url                         RPC, from the RPC_* variables
#   [oslo_messaging_notifications] transport_url    notifications, from NOTIFY_*
#
# Credentials and vhosts are percent-encoded, so any password is safe in the
# URL and in the ini file.
#
#   [[local|localrc]]
#   enable_plugin notify-transport <git url of this repository>
#
# Outside devstack the configuration functions work on their own (the helpers
# devstack would provide get a minimal stand-in below), e.g.:
#
#   source devstack/plugin.sh
#   iniset_rpc_backend nova /etc/nova/nova.conf
#
# Phases: stack pre-install (check settings), stack install (notify-transport,
# Kafka), stack post-config (configure and start Kafka, RabbitMQ vhosts),
# stack extra (smoke check), unstack (stop Kafka), clean (remove Kafka).

# Passwords go through these functions: keep them out of the xtrace log.
_XTRACE_NOTIFY_TRANSPORT=$(set +o | grep xtrace)
set +o xtrace

NOTIFY_TRANSPORT_PLUGIN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# devstack sources settings before plugin.sh; outside devstack we do.
if [[ -z "${NOTIFY_TRANSPORT_SETTINGS_LOADED:-}" ]]; then
    source "$NOTIFY_TRANSPORT_PLUGIN_DIR/settings"
fi


# Stand-ins for devstack helpers, used only outside devstack
# ----------------------------------------------------------

if ! declare -F iniset >/dev/null; then
    # iniset [-sudo] config-file section option value
    # Same result as devstack's: a missing section is appended at the end
    # after a blank line, a missing option goes right under its section
    # header, an existing one is replaced in place.
    function iniset {
        local sudo=""
        if [[ "${1:-}" == "-sudo" ]]; then
            sudo="sudo"
            shift
        fi
        local file=$1 section=$2 option=$3 value=${4:-}
        [[ -z "$section" || -z "$option" ]] && return 0
        [[ -e "$file" ]] || $sudo touch "$file"
        local tmp
        tmp=$(mktemp)
        NT_INI_SECTION=$section NT_INI_OPTION=$option NT_INI_VALUE=$value awk '
            function is_header(l) { return l ~ /^\[.*\]/ }
            function is_option(l) {
                return substr(l, 1, length(opt)) == opt && substr(l, length(opt) + 1) ~ /^[ \t]*=/
            }
            BEGIN {
                sec = ENVIRON["NT_INI_SECTION"]; opt = ENVIRON["NT_INI_OPTION"]
                line = opt " = " ENVIRON["NT_INI_VALUE"]; header = "[" sec "]"
            }
            NR == FNR {
                if (is_header($0)) { in_sec = (substr($0, 1, length(header)) == header) }
                if (in_sec && is_header($0)) has_sec = 1
                if (in_sec && is_option($0)) has_opt = 1
                next
            }
            FNR == 1 { in_sec = 0 }
            {
                if (is_header($0)) {
                    in_sec = (substr($0, 1, length(header)) == header)
                    print
                    if (in_sec && !has_opt && !inserted) { print line; inserted = 1 }
                    next
                }
                if (in_sec && has_opt && is_option($0)) {
                    match($0, /^[^=]*=[ \t]*/)
                    print substr($0, 1, RLENGTH) ENVIRON["NT_INI_VALUE"]
                    next
                }
                print
            }
            END { if (!has_sec) { print ""; print header; print line } }
        ' "$file" "$file" >"$tmp"
        $sudo cp "$tmp" "$file"
        rm -f "$tmp"
    }
fi

if ! declare -F echo_summary >/dev/null; then
    function echo_summary {
        echo "notify-transport: $*"
    }
fi

if ! declare -F die >/dev/null; then
    # die $LINENO "message"
    function die {
        local line=$1
        shift
        echo "[ERROR] ${BASH_SOURCE[1]:-plugin.sh}:$line $*" >&2
        exit 1
    }
fi

if ! declare -F is_service_enabled >/dev/null; then
    # Outside devstack, ENABLED_SERVICES (a comma list) says what runs on this
    # host; when it is unset the Kafka broker is installed if notifications go
    # to Kafka. ENABLED_SERVICES="" uses an external cluster (NOTIFY_HOST).
    if [[ -z "${ENABLED_SERVICES+set}" && "$NOTIFY_SERVICE" == "kafka" ]]; then
        ENABLED_SERVICES=kafka
    fi
    # is_service_enabled service [service ...]: true if any is in ENABLED_SERVICES
    function is_service_enabled {
        local service
        for service in "$@"; do
            [[ ",${ENABLED_SERVICES:-}," == *",$service,"* ]] && return 0
        done
        return 1
    }
fi

if ! declare -F pip_install >/dev/null; then
    function pip_install {
        "${PYTHON:-python3}" -m pip install "$@"
    }
fi


# Transport URLs
# --------------

# _nt_urlencode STRING: percent-encode all but RFC 3986 unreserved characters
# (byte by byte, so UTF-8 text is encoded as its bytes).
function _nt_urlencode {
    local LC_ALL=C
    local text=$1 out="" char i
    for ((i = 0; i < ${#text}; i++)); do
        char=${text:i:1}
        case "$char" in
            [A-Za-z0-9._~-]) out+=$char ;;
            *) printf -v char '%%%02X' "'$char"; out+=$char ;;
        esac
    done
    printf '%s' "$out"
}

# _nt_host_port ENTRY DEFAULT_PORT: "host[:port]" with the default port filled
# in and IPv6 addresses in brackets.
function _nt_host_port {
    local entry=$1 port=$2
    if [[ "$entry" == \[* ]]; then
        if [[ "$entry" == *\]:* ]]; then
            printf '%s' "$entry"
        else
            printf '%s:%s' "$entry" "$port"
        fi
    elif [[ "$entry" == *:*:* ]]; then
        printf '[%s]:%s' "$entry" "$port"
    elif [[ "$entry" == *:* ]]; then
        printf '%s' "$entry"
    else
        printf '%s:%s' "$entry" "$port"
    fi
}

# _nt_netloc HOSTS PORT USER PASSWORD: "user:pass@h1:p1,user:pass@h2:p2"
function _nt_netloc {
    local hosts=$1 port=$2 user=$3 password=$4
    local cred="" out="" entry
    local -a entries
    if [[ -n "$user" ]]; then
        cred=$(_nt_urlencode "$user")
        if [[ -n "$password" ]]; then
            cred+=":$(_nt_urlencode "$password")"
        fi
        cred+="@"
    fi
    IFS=, read -r -a entries <<<"$hosts"
    for entry in "${entries[@]}"; do
        entry=${entry//[[:space:]]/}
        [[ -z "$entry" ]] && continue
        out+="${out:+,}${cred}$(_nt_host_port "$entry" "$port")"
    done
    printf '%s' "$out"
}

# _nt_url SCHEME HOSTS PORT USER PASSWORD VHOST: "scheme://netloc/vhost"; an
# empty vhost leaves the path empty (the broker's default vhost for RabbitMQ,
# no topic suffix for Kafka).
function _nt_url {
    printf '%s://%s/%s' "$1" "$(_nt_netloc "$2" "$3" "$4" "$5")" "$(_nt_urlencode "$6")"
}

# _nt_redact URL: the URL with passwords replaced by *** (encoded passwords
# never contain "@", "," or "/").
function _nt_redact {
    printf '%s' "$1" | sed -E 's#(//|,)([^:/@,]*):[^@/,]*@#\1\2:***@#g'
}

function _nt_rpc_host {
    printf '%s' "${RPC_HOST:-${RABBIT_HOST:-${SERVICE_HOST:-127.0.0.1}}}"
}

# RPC credentials: RPC_USER/RPC_PASSWORD, else devstack's RabbitMQ account.
function _nt_rpc_user {
    printf '%s' "${RPC_USER:-${RABBIT_USERID:-}}"
}

function _nt_rpc_password {
    if [[ -n "$RPC_USER" ]]; then
        printf '%s' "$RPC_PASSWORD"
    else
        printf '%s' "${RABBIT_PASSWORD:-}"
    fi
}

function _nt_notify_scheme {
    printf '%s' "${NOTIFY_SCHEME:-$NOTIFY_SERVICE}"
}

function _nt_notify_host {
    if [[ "$NOTIFY_SERVICE" == "rabbit" ]]; then
        printf '%s' "${NOTIFY_HOST:-$(_nt_rpc_host)}"
    else
        printf '%s' "${NOTIFY_HOST:-${SERVICE_HOST:-127.0.0.1}}"
    fi
}

function _nt_notify_port {
    if [[ "$NOTIFY_SERVICE" == "rabbit" ]]; then
        printf '%s' "${NOTIFY_PORT:-$RPC_PORT}"
    else
        printf '%s' "${NOTIFY_PORT:-9092}"
    fi
}

# Notification credentials: NOTIFY_USER/NOTIFY_PASSWORD; with rabbit and no
# NOTIFY_USER, the RPC account.
function _nt_notify_user {
    if [[ -z "$NOTIFY_USER" && "$NOTIFY_SERVICE" == "rabbit" ]]; then
        _nt_rpc_user
    else
        printf '%s' "$NOTIFY_USER"
    fi
}

function _nt_notify_password {
    if [[ -z "$NOTIFY_USER" && "$NOTIFY_SERVICE" == "rabbit" ]]; then
        _nt_rpc_password
    else
        printf '%s' "$NOTIFY_PASSWORD"
    fi
}

function _nt_notify_security_protocol {
    if [[ -n "$NOTIFY_SECURITY_PROTOCOL" ]]; then
        printf '%s' "$NOTIFY_SECURITY_PROTOCOL"
    elif [[ -n "$NOTIFY_USER" ]]; then
        printf 'SASL_PLAINTEXT'
    else
        printf 'PLAINTEXT'
    fi
}

# get_transport_url [vhost]: the RPC URL (devstack hook). The argument, when
# not empty, replaces RPC_VHOST (devstack passes a cell's vhost this way).
function get_transport_url {
    local xtrace
    xtrace=$(set +o | grep xtrace)
    set +o xtrace
    local vhost=${1:-$RPC_VHOST}
    _nt_url "$RPC_SERVICE" "$(_nt_rpc_host)" "$RPC_PORT" "$(_nt_rpc_user)" \
        "$(_nt_rpc_password)" "$vhost"
    echo
    $xtrace
}

# get_notification_url [vhost]: the notification URL (devstack hook).
function get_notification_url {
    local xtrace
    xtrace=$(set +o | grep xtrace)
    set +o xtrace
    local vhost=${1:-$NOTIFY_VHOST}
    _nt_url "$(_nt_notify_scheme)" "$(_nt_notify_host)" "$(_nt_notify_port)" \
        "$(_nt_notify_user)" "$(_nt_notify_password)" "$vhost"
    echo
    $xtrace
}

# iniset_notification_backend package config-file [vhost]
# Writes [oslo_messaging_notifications] transport_url and, for Kafka, the
# client security options of [oslo_messaging_kafka].
function iniset_notification_backend {
    local xtrace
    xtrace=$(set +o | grep xtrace)
    set +o xtrace
    local file=$2 vhost=${3:-}
    local url protocol
    url=$(get_notification_url "$vhost")
    iniset "$file" oslo_messaging_notifications transport_url "$url"
    if [[ "$NOTIFY_SERVICE" == "kafka" ]]; then
        protocol=$(_nt_notify_security_protocol)
        # iniset puts a new option right under its section header: written
        # in reverse so that the file reads protocol, mechanism, CA file.
        if [[ "$protocol" == *SSL && -n "$NOTIFY_SSL_CAFILE" ]]; then
            iniset "$file" oslo_messaging_kafka ssl_cafile "$NOTIFY_SSL_CAFILE"
        fi
        if [[ "$protocol" == SASL_* ]]; then
            iniset "$file" oslo_messaging_kafka sasl_mechanism "$NOTIFY_SASL_MECHANISM"
        fi
        if [[ "$protocol" != "PLAINTEXT" ]]; then
            iniset "$file" oslo_messaging_kafka security_protocol "$protocol"
        fi
    fi
    $xtrace
}

# iniset_rpc_backend package config-file [section] [vhost]  (devstack hook)
# Writes the RPC transport_url in [section] (default DEFAULT) and the
# notification settings.
function iniset_rpc_backend {
    local xtrace
    xtrace=$(set +o | grep xtrace)
    set +o xtrace
    local package=$1 file=$2 section=${3:-DEFAULT} vhost=${4:-}
    local url
    url=$(get_transport_url "$vhost")
    iniset "$file" "$section" transport_url "$url"
    if [[ "$RPC_SERVICE" == "rabbit" && -n "${RABBIT_HEARTBEAT_TIMEOUT_THRESHOLD:-}" ]]; then
        iniset "$file" oslo_messaging_rabbit heartbeat_timeout_threshold "$RABBIT_HEARTBEAT_TIMEOUT_THRESHOLD"
    fi
    if [[ "$RPC_SERVICE" == "rabbit" && -n "${RABBIT_HEARTBEAT_RATE:-}" ]]; then
        iniset "$file" oslo_messaging_rabbit heartbeat_rate "$RABBIT_HEARTBEAT_RATE"
    fi
    iniset_notification_backend "$package" "$file"
    $xtrace
}

# check_notify_transport_settings: stop early, with the reason, on a
# configuration that would produce broken URLs or a broker that cannot start.
function check_notify_transport_settings {
    if [[ "$RPC_SERVICE" != "rabbit" ]]; then
        die $LINENO "RPC_SERVICE=$RPC_SERVICE is not supported: RPC runs on RabbitMQ" \
            "(RPC_SERVICE=rabbit); Kafka carries notifications only"
    fi
    if [[ "$NOTIFY_SERVICE" != "kafka" && "$NOTIFY_SERVICE" != "rabbit" ]]; then
        die $LINENO "NOTIFY_SERVICE=$NOTIFY_SERVICE is not supported: use kafka or rabbit"
    fi
    local name value
    for name in RPC_PORT NOTIFY_PORT KAFKA_CONTROLLER_PORT KAFKA_NUM_PARTITIONS KAFKA_START_TIMEOUT; do
        value=${!name}
        if [[ -n "$value" && ! "$value" =~ ^[0-9]+$ ]]; then
            die $LINENO "$name must be a number, not '$value'"
        fi
    done
    if [[ -n "$NOTIFY_PASSWORD" && -z "$NOTIFY_USER" ]]; then
        die $LINENO "NOTIFY_PASSWORD is set but NOTIFY_USER is empty"
    fi
    local protocol
    protocol=$(_nt_notify_security_protocol)
    case "$protocol" in
        PLAINTEXT|SASL_PLAINTEXT|SSL|SASL_SSL) ;;
        *) die $LINENO "NOTIFY_SECURITY_PROTOCOL=$protocol: use PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL" ;;
    esac
    if [[ "$NOTIFY_SERVICE" == "kafka" ]] && is_service_enabled kafka; then
        if [[ "$protocol" != "PLAINTEXT" && "$protocol" != "SASL_PLAINTEXT" ]]; then
            die $LINENO "The Kafka broker installed by this plugin serves PLAINTEXT or SASL_PLAINTEXT," \
                "not $protocol; disable the kafka service and set NOTIFY_HOST to an external cluster"
        fi
        if [[ "$protocol" == "SASL_PLAINTEXT" ]]; then
            if [[ "$NOTIFY_SASL_MECHANISM" != "PLAIN" ]]; then
                die $LINENO "The Kafka broker installed by this plugin supports SASL PLAIN, not" \
                    "$NOTIFY_SASL_MECHANISM; use an external cluster for SCRAM"
            fi
            if [[ ! "$NOTIFY_USER" =~ ^[A-Za-z0-9._-]+$ ]]; then
                die $LINENO "NOTIFY_USER may only hold letters, digits, '.', '_' and '-' for the" \
                    "Kafka broker installed by this plugin"
            fi
            if ! _nt_is_printable_ascii "$NOTIFY_PASSWORD"; then
                die $LINENO "NOTIFY_PASSWORD must be printable ASCII (and not empty) for the Kafka" \
                    "broker installed by this plugin"
            fi
        fi
    fi
}

# _nt_is_printable_ascii TEXT: true when TEXT is not empty and holds only
# bytes from space to "~" (what a Java properties file carries unescaped).
function _nt_is_printable_ascii {
    local LC_ALL=C
    [[ "$1" =~ ^[\ -~]+$ ]]
}


# notify-transport itself
# -----------------------

function install_notify_transport {
    echo_summary "Installing notify-transport from $NOTIFY_TRANSPORT_DIR"
    pip_install -e "$NOTIFY_TRANSPORT_DIR${NOTIFY_TRANSPORT_EXTRAS:+[$NOTIFY_TRANSPORT_EXTRAS]}"
}

# RabbitMQ vhosts named in RPC_VHOST / NOTIFY_VHOST must exist (devstack's
# RabbitMQ only; an external broker is the operator's).
function configure_rabbit_vhosts {
    if ! is_service_enabled rabbit || ! declare -F rpc_backend_add_vhost >/dev/null; then
        return 0
    fi
    if [[ -n "$RPC_VHOST" ]]; then
        rpc_backend_add_vhost "$RPC_VHOST"
    fi
    if [[ "$NOTIFY_SERVICE" == "rabbit" && -n "$NOTIFY_VHOST" && "$NOTIFY_VHOST" != "$RPC_VHOST" ]]; then
        rpc_backend_add_vhost "$NOTIFY_VHOST"
    fi
}

# The installed package imports, and what the services were told to use.
function check_notify_transport {
    "${PYTHON:-python3}" -c 'import notify_transport' ||
        die $LINENO "notify-transport is not importable by ${PYTHON:-python3}"
    echo_summary "RPC: $(_nt_redact "$(get_transport_url)")"
    echo_summary "Notifications: $(_nt_redact "$(get_notification_url)")"
}


# Kafka broker (KRaft mode: broker and controller in one process)
# ---------------------------------------------------------------

function _nt_kafka_tarball {
    printf 'kafka_%s-%s.tgz' "$SCALA_VERSION" "$KAFKA_VERSION"
}

function _nt_kafka_home {
    printf '%s/kafka' "$KAFKA_DEST"
}

# First NOTIFY_HOST entry without its port: the address clients are told.
function _nt_kafka_advertised_host {
    if [[ -n "$KAFKA_ADVERTISED_HOST" ]]; then
        printf '%s' "$KAFKA_ADVERTISED_HOST"
        return
    fi
    local first
    first=$(_nt_notify_host)
    first=${first%%,*}
    first=${first//[[:space:]]/}
    if [[ "$first" == \[* ]]; then
        first=${first%%]*}
        printf '%s' "${first#[}"
    elif [[ "$first" == *:*:* ]]; then
        printf '%s' "$first"
    else
        printf '%s' "${first%%:*}"
    fi
}

# The port the local broker serves: the first NOTIFY_HOST entry's, else NOTIFY_PORT.
function _nt_kafka_port {
    local first
    first=$(_nt_host_port "$(_nt_notify_host | cut -d, -f1 | tr -d '[:space:]')" "$(_nt_notify_port)")
    printf '%s' "${first##*:}"
}

# Brackets around IPv6 addresses, for listener definitions.
function _nt_bracket {
    if [[ "$1" == *:* ]]; then
        printf '[%s]' "$1"
    else
        printf '%s' "$1"
    fi
}

# A Java-properties value holding a JAAS quoted string: JAAS escapes " and \,
# and the properties format then escapes \ again.
function _nt_jaas_quote {
    local value=$1
    value=${value//\\/\\\\}
    value=${value//\"/\\\"}
    value=${value//\\/\\\\}
    printf '"%s"' "$value"
}

function _nt_kafka_server_properties {
    local protocol port advertised
    protocol=$(_nt_notify_security_protocol)
    port=$(_nt_kafka_port)
    advertised=$(_nt_bracket "$(_nt_kafka_advertised_host)")
    cat <<EOF
# Written by notify-transport's devstack plugin: one Kafka node in KRaft mode
# (broker and controller in one process, no ZooKeeper).
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${KAFKA_CONTROLLER_PORT}
controller.listener.names=CONTROLLER
listeners=${protocol}://$(_nt_bracket "$KAFKA_LISTEN_HOST"):${port},CONTROLLER://127.0.0.1:${KAFKA_CONTROLLER_PORT}
advertised.listeners=${protocol}://${advertised}:${port}
inter.broker.listener.name=${protocol}
listener.security.protocol.map=CONTROLLER:PLAINTEXT,${protocol}:${protocol}
log.dirs=${KAFKA_DATA_DIR}
num.partitions=${KAFKA_NUM_PARTITIONS}
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
auto.create.topics.enable=true
group.initial.rebalance.delay.ms=0
EOF
    if [[ "$protocol" == "SASL_PLAINTEXT" ]]; then
        local password
        password=$(_nt_jaas_quote "$NOTIFY_PASSWORD")
        cat <<EOF
sasl.enabled.mechanisms=PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="${NOTIFY_USER}" password=${password} user_${NOTIFY_USER}=${password};
EOF
    fi
}

function _nt_ensure_java {
    if command -v java >/dev/null; then
        return 0
    fi
    if declare -F install_package >/dev/null; then
        if is_ubuntu; then
            install_package default-jre-headless
        else
            install_package java-17-openjdk-headless
        fi
    fi
    command -v java >/dev/null || die $LINENO "Kafka needs Java 17 (or 11 for Kafka 3.x): install a JRE"
}

# download_kafka: ${KAFKA_BASEURL}/${KAFKA_VERSION}/kafka_${SCALA_VERSION}-${KAFKA_VERSION}.tgz
# into KAFKA_DOWNLOAD_DIR, once; checked against KAFKA_SHA512 when it is set.
function download_kafka {
    local tarball target url
    tarball=$(_nt_kafka_tarball)
    target="$KAFKA_DOWNLOAD_DIR/$tarball"
    url="$KAFKA_BASEURL/$KAFKA_VERSION/$tarball"
    if [[ ! -s "$target" ]]; then
        mkdir -p "$KAFKA_DOWNLOAD_DIR"
        curl --fail --silent --show-error --location --retry 3 -o "$target.part" "$url" ||
            die $LINENO "Could not download $url (check KAFKA_BASEURL, KAFKA_VERSION, SCALA_VERSION)"
        mv "$target.part" "$target"
    fi
    if [[ -n "${KAFKA_SHA512:-}" ]]; then
        echo "${KAFKA_SHA512}  $target" | sha512sum --check --status ||
            die $LINENO "$target does not match KAFKA_SHA512"
    fi
}

function install_kafka {
    echo_summary "Installing Kafka $KAFKA_VERSION (Scala $SCALA_VERSION)"
    _nt_ensure_java
    download_kafka
    local unpacked
    unpacked="$KAFKA_DEST/kafka_${SCALA_VERSION}-${KAFKA_VERSION}"
    if [[ ! -x "$unpacked/bin/kafka-server-start.sh" ]]; then
        mkdir -p "$KAFKA_DEST"
        tar -xzf "$KAFKA_DOWNLOAD_DIR/$(_nt_kafka_tarball)" -C "$KAFKA_DEST" ||
            die $LINENO "Could not unpack $(_nt_kafka_tarball)"
        [[ -x "$unpacked/bin/kafka-server-start.sh" ]] ||
            die $LINENO "$(_nt_kafka_tarball) has no kafka_${SCALA_VERSION}-${KAFKA_VERSION}/bin/kafka-server-start.sh"
    fi
    ln -sfn "$unpacked" "$(_nt_kafka_home)"
}

# configure_kafka: server.properties, storage formatted once with a cluster id
# that is kept across restarts, and the launcher run by systemd or in the
# background.
function configure_kafka {
    echo_summary "Configuring Kafka"
    local home conf_dir properties cluster_id_file cluster_id
    home=$(_nt_kafka_home)
    conf_dir="$KAFKA_DEST/config"
    properties="$conf_dir/server.properties"
    cluster_id_file="$conf_dir/cluster.id"
    mkdir -p "$conf_dir" "$KAFKA_DEST/bin" "$KAFKA_DEST/logs" "$KAFKA_DATA_DIR"
    (umask 077 && _nt_kafka_server_properties >"$properties")
    if [[ ! -s "$cluster_id_file" ]]; then
        cluster_id=$("$home/bin/kafka-storage.sh" random-uuid | tail -n 1 | tr -d '[:space:]')
        [[ -n "$cluster_id" ]] || die $LINENO "kafka-storage.sh random-uuid printed no cluster id"
        printf '%s\n' "$cluster_id" >"$cluster_id_file"
    fi
    cluster_id=$(tr -d '[:space:]' <"$cluster_id_file")
    "$home/bin/kafka-storage.sh" format --ignore-formatted -t "$cluster_id" -c "$properties" ||
        die $LINENO "kafka-storage.sh format failed for $KAFKA_DATA_DIR"
    {
        echo '#!/bin/bash'
        echo '# Runs the Kafka broker of notify-transport'"'"'s devstack plugin in the foreground.'
        printf 'export KAFKA_HEAP_OPTS=%q\n' "$KAFKA_HEAP_OPTS"
        printf 'export LOG_DIR=%q\n' "$KAFKA_DEST/logs"
        printf 'exec %q %q\n' "$home/bin/kafka-server-start.sh" "$properties"
    } >"$KAFKA_DEST/bin/kafka-broker"
    chmod 755 "$KAFKA_DEST/bin/kafka-broker"
}

function _nt_kafka_pid_file {
    printf '%s/kafka.pid' "$KAFKA_DEST"
}

# _nt_background_pid: the pid of the broker started in the background, if alive.
function _nt_background_pid {
    local pid_file pid
    pid_file=$(_nt_kafka_pid_file)
    [[ -s "$pid_file" ]] || return 1
    pid=$(<"$pid_file")
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
        printf '%s' "$pid"
        return 0
    fi
    return 1
}

# _nt_wait_for_port HOST PORT TIMEOUT: until something accepts TCP connections.
function _nt_wait_for_port {
    local host=$1 port=$2 timeout=$3
    local deadline=$((SECONDS + timeout))
    while ((SECONDS < deadline)); do
        if timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null; then
            return 0
        fi
        if ! declare -F run_process >/dev/null && ! _nt_background_pid >/dev/null; then
            echo "Kafka exited; last lines of $KAFKA_DEST/logs/kafka.out:" >&2
            tail -n 20 "$KAFKA_DEST/logs/kafka.out" >&2 2>/dev/null
            return 1
        fi
        sleep 1
    done
    return 1
}

# start_kafka: as the devstack@kafka systemd unit under devstack (run_process),
# in the background with a pid file otherwise; returns once the port answers.
function start_kafka {
    echo_summary "Starting Kafka"
    local launcher="$KAFKA_DEST/bin/kafka-broker"
    [[ -x "$launcher" ]] || die $LINENO "$launcher is missing: run configure_kafka first"
    if declare -F run_process >/dev/null; then
        run_process kafka "$launcher"
    elif ! _nt_background_pid >/dev/null; then
        mkdir -p "$KAFKA_DEST/logs"
        nohup "$launcher" >"$KAFKA_DEST/logs/kafka.out" 2>&1 </dev/null &
        echo $! >"$(_nt_kafka_pid_file)"
    fi
    local host port
    host=$(_nt_kafka_advertised_host)
    port=$(_nt_kafka_port)
    _nt_wait_for_port "$host" "$port" "$KAFKA_START_TIMEOUT" ||
        die $LINENO "Kafka does not accept connections on $host:$port after ${KAFKA_START_TIMEOUT}s"
}

function stop_kafka {
    echo_summary "Stopping Kafka"
    if declare -F stop_process >/dev/null; then
        stop_process kafka
        return 0
    fi
    local pid i
    if pid=$(_nt_background_pid); then
        kill -TERM "$pid"
        for ((i = 0; i < 60; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid"
        fi
    fi
    rm -f "$(_nt_kafka_pid_file)"
}

# cleanup_kafka: the installation, its data and the downloaded distribution.
# Runs after stop_kafka (clean.sh calls unstack.sh first).
function cleanup_kafka {
    echo_summary "Removing Kafka"
    rm -rf "${KAFKA_DEST:?}" "${KAFKA_DATA_DIR:?}"
    rm -f "${KAFKA_DOWNLOAD_DIR:?}/$(_nt_kafka_tarball)"
}


# Dispatch
# --------

if [[ "${1:-}" == "stack" ]]; then
    case "${2:-}" in
        pre-install)
            check_notify_transport_settings
            ;;
        install)
            check_notify_transport_settings
            install_notify_transport
            if is_service_enabled kafka; then
                install_kafka
            fi
            ;;
        post-config)
            # Before any service starts.
            if is_service_enabled kafka; then
                configure_kafka
                start_kafka
            fi
            configure_rabbit_vhosts
            ;;
        extra)
            check_notify_transport
            ;;
    esac
elif [[ "${1:-}" == "unstack" ]]; then
    if is_service_enabled kafka; then
        stop_kafka
    fi
elif [[ "${1:-}" == "clean" ]]; then
    if is_service_enabled kafka; then
        cleanup_kafka
    fi
fi

# Restore xtrace
$_XTRACE_NOTIFY_TRANSPORT

## Local variables:
## mode: shell-script
## End:
