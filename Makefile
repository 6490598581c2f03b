# The two commands of the README.
#   make run    set up ./.venv and run the main job on the bundled sample (embedded defaults)
#   make test   set up ./.venv with the test extras and run the whole test suite
#   make lint   ruff (lint and format check) and mypy over the whole repository
.PHONY: run test lint setup setup-test bench

run: setup
	.venv/bin/skillstream run
	.venv/bin/skillstream stats

test: setup-test
	.venv/bin/python -m pytest

lint: setup-test
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy skillstream benchmarks

setup:
	bash scripts/setup.sh

setup-test:
	bash scripts/setup.sh test

bench: setup
	.venv/bin/python benchmarks/ingest.py --json benchmarks/results/ingest.json
