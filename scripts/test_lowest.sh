#!/usr/bin/env bash
# The suites that exercise pyarrow, lancedb and openai, on the LOWEST versions pyproject.toml
# admits (scripts/constraints/lowest.txt), in an environment of their own (.venv-lowest), so the
# ranges in pyproject.toml are tested at both ends: `make test` runs the whole suite on the pinned
# (newest tested) versions, then this.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-lowest CONSTRAINTS=scripts/constraints/lowest.txt bash scripts/setup.sh test
.venv-lowest/bin/python - <<'PY'
import importlib.metadata as md
print("lowest versions:", ", ".join(f"{p} {md.version(p)}" for p in ("pyarrow", "lancedb", "openai")))
PY
# The tests marked slow (kills, clusters, servers in subprocesses) check skillstream's own process
# behaviour, which the run on the pinned versions has just checked; the fast tests of these
# folders are the ones that cross the libraries' interfaces. The core's tests (rules, pipeline)
# touch none of the three libraries, except the one pipeline test that reads LanceDB back.
.venv-lowest/bin/python -m pytest -q -p no:cacheprovider -m "not slow" \
  tests/storage tests/llm tests/cli tests/foundation tests/connectors \
  tests/pipeline/test_evicted_minimal_rows.py
