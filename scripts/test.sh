#!/usr/bin/env bash
# Set everything up, then run the whole test suite (unit, functional, spark).
# Extra arguments go to pytest, e.g. `scripts/test.sh tests/unit`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/rabbitmq.sh"
cd "$ROOT"
exec "${VENV:-$ROOT/.venv}/bin/python" -m pytest -q -ra --durations=15 "${@:-tests}"
