#!/usr/bin/env bash
# Create ./.venv (Python 3.11) and install skillstream into it.
#   scripts/setup.sh          runtime only
#   scripts/setup.sh test     plus what the test suite needs (S3 server, Kafka broker, llama.cpp,
#                             and Debian's postgresql and chromium packages when the machine has
#                             no PostgreSQL or Chromium: the page tests drive a headless Chromium)
# VENV (default .venv) names the environment's folder; CONSTRAINTS (default
# scripts/constraints/pinned.txt) the versions to take within pyproject's ranges.
# torch is installed first, pinned to the CPU build (an unpinned torch pulls a multi-GB CUDA build).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV=${VENV:-.venv}
CONSTRAINTS=${CONSTRAINTS:-scripts/constraints/pinned.txt}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
python -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null \
  || python -m pip install -q "torch==2.13.0"
if [ "${1:-}" = "test" ]; then
  # The DuckLake catalog tests start a PostgreSQL server from the machine's binaries.
  MISSING=""
  if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    MISSING="postgresql"
  fi
  command -v chromium >/dev/null 2>&1 || MISSING="$MISSING chromium"
  if [ -n "$MISSING" ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $MISSING
  fi
  python -m pip install -q -e ".[test]" -c "$CONSTRAINTS"
  bash scripts/install_llama.sh
else
  python -m pip install -q -e . -c "$CONSTRAINTS"
fi
