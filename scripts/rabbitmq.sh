#!/usr/bin/env bash
# Make sure RabbitMQ is running on 127.0.0.1:5672, installing it if absent.
set -euo pipefail
log() { printf '[rabbitmq] %s\n' "$*"; }
port_open() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }

if port_open && rabbitmqctl -q status >/dev/null 2>&1; then
  # the app may be stopped (stop_app) while the node runs
  rabbitmqctl -q start_app >/dev/null 2>&1 || true
  log "running"; exit 0
fi
if ! command -v rabbitmq-server >/dev/null 2>&1; then
  log "installing rabbitmq-server"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null && apt-get -o DPkg::Lock::Timeout=600 install -y -qq rabbitmq-server >/dev/null
fi
if ! rabbitmqctl -q status >/dev/null 2>&1; then
  log "starting rabbitmq-server"
  rabbitmq-server -detached
fi
for _ in $(seq 1 120); do
  if rabbitmqctl -q await_startup >/dev/null 2>&1 && port_open; then
    rabbitmqctl -q start_app >/dev/null 2>&1 || true
    log "running"; exit 0
  fi
  sleep 1
done
echo "RabbitMQ did not start within 120 s" >&2
exit 1
