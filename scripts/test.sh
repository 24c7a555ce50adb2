#!/usr/bin/env bash
# Set everything up, type-check the package (mypy, configured in setup.cfg), then run
# the whole test suite (unit, functional, spark).
# Extra arguments go to pytest (and skip the type check), e.g. `scripts/test.sh tests/unit`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/rabbitmq.sh"
cd "$ROOT"
if [ $# -eq 0 ]; then
  "${VENV:-$ROOT/.venv}/bin/python" -m mypy
fi
exec "${VENV:-$ROOT/.venv}/bin/python" -m pytest -q -ra --durations=60 "${@:-tests}"
