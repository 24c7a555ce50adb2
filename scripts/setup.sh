#!/usr/bin/env bash
# Set up from nothing, idempotently: a virtualenv in .venv with the project and
# the extras named as arguments (default: everything the tests need), plus the
# system pieces those extras need (Java for Spark and Apache Kafka, Maven to fetch
# Apache Kafka's and Spark's Kafka connector's jars from Maven Central into
# ~/.cache/notify-transport/jvm once, and javac to build the pipeline's JVM decoder there;
# RabbitMQ is started by scripts/rabbitmq.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
EXTRAS=${1:-test,embedded,spark,docs,bench}

log() { printf '[setup] %s\n' "$*"; }

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "Python >= 3.11 required (found $("$PYTHON" --version 2>&1))" >&2; exit 1; }

apt_install() {
  # wait for another apt-get (a second setup, unattended upgrades) instead of failing on its lock
  log "installing $* with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  local out
  out=$(mktemp)
  # apt's and debconf's own lines go to a log, shown only when the install fails
  if ! { apt-get -o DPkg::Lock::Timeout=600 update -qq && \
         apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@"; } >"$out" 2>&1; then
    cat "$out" >&2; rm -f "$out"; return 1
  fi
  rm -f "$out"
}

if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
# pip's and the build backend's own lines (warnings about editable installs...) go to a log,
# shown only when the install fails
pip_install() {
  local out
  out=$(mktemp)
  if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" >"$out" 2>&1; then
    cat "$out" >&2; rm -f "$out"; return 1
  fi
  rm -f "$out"
}
pip_install --upgrade pip setuptools wheel
log "installing notify-transport[$EXTRAS]"
pip_install -e "$ROOT[$EXTRAS]"

have_java17() { java -version 2>&1 | grep -qE 'version "(1[7-9]|2[0-9])'; }

case ",$EXTRAS," in
  *,test,*|*,bench,*)
    # Apache Kafka 4 (the broker of record of the tests and benchmarks) runs on Java 17+
    have_java17 || apt_install openjdk-17-jre-headless
    command -v mvn >/dev/null 2>&1 || apt_install maven
    log "fetching Apache Kafka's jars with Maven (cached after the first run)"
    "$VENV/bin/python" -m notify_transport.jvm fetch apache-kafka >/dev/null ;;
esac

case ",$EXTRAS," in
  *,spark,*)
    have_java17 || apt_install openjdk-17-jre-headless
    command -v mvn >/dev/null 2>&1 || apt_install maven
    # the pipeline's decoder in the JVM is compiled against the installed PySpark with a JDK's javac
    command -v javac >/dev/null 2>&1 || apt_install openjdk-17-jdk-headless
    # Spark's Kafka connector at the installed PySpark's version (the pipeline's reader of record)
    # and the JVM decoder, both cached after the first run: the command a user runs too
    log "setting up the pipeline's JVM pieces: notify-transport pipeline setup"
    "$VENV/bin/notify-transport" pipeline setup >/dev/null
    # the pipeline report's browser test renders the page in headless Chromium
    if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
      apt_install chromium || log "chromium not installed: the report's browser test will be skipped"
    fi ;;
esac
log "done: $VENV"
