# The two commands of the README.
#   make run    set up ./.venv and run the main job on the bundled sample (embedded defaults)
#   make test   set up ./.venv with the test extras, check style, types and import contracts, and
#               run the whole test suite (this is what CI runs); then the storage, LLM, CLI,
#               foundation and connector tests again in ./.venv-lowest, on the lowest versions
#               of the dependency ranges (those not marked slow)
#   make lint   only the checks: ruff (lint and format), mypy, import-linter
#   make bench  regenerate every results file in benchmarks/results (ONLY=name for one)
.PHONY: run test lint checks setup setup-test bench docs

run: setup
	.venv/bin/skillstream run
	.venv/bin/skillstream stats

test: setup-test
	$(MAKE) --no-print-directory checks
	.venv/bin/python -m pytest
	bash scripts/test_lowest.sh

lint: setup-test
	$(MAKE) --no-print-directory checks

# The checks themselves, on an environment made by setup-test. mypy and lint-imports read the
# installed tree (skillstream/flows/ and so on) that scripts/layout.py builds in build/layout.
checks:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/python scripts/layout.py
	.venv/bin/mypy build/layout/skillstream benchmarks scripts tests
	cd build/layout && ../../.venv/bin/lint-imports --no-cache --no-logo

setup:
	bash scripts/setup.sh

setup-test:
	bash scripts/setup.sh test

# docs/settings.md from the settings' declarations (a test fails while it is out of date).
docs: setup
	.venv/bin/python scripts/settings_doc.py

# Every results file of benchmarks/results/ written again by the command that wrote it
# (benchmarks/manifest.py): hours, on a quiet machine. `make bench ONLY=ingest` runs one (a name,
# or a results file it writes; several comma-separated); `.venv/bin/python benchmarks/run_all.py
# --list` prints the commands. The test extras bring what some need (matplotlib, nltk, the
# Kafka broker, PostgreSQL).
bench: setup-test
	.venv/bin/python benchmarks/run_all.py $(if $(ONLY),--only "$(ONLY)")
