# planrun: `make test` sets up everything a fresh machine needs, then runs the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: all install engine image browser host-tools test test-unit test-docker test-live bench bench-quick lint demo clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## A Docker engine: the reachable one, or (root on Debian) docker.io installed and started.
engine: install
	$(BIN)/planrun engine start

## The sandbox image (offline from a Debian root filesystem when no registry answers).
image: engine
	$(BIN)/planrun image build

## Headless Chromium, which renders report.html in the tests (root on Debian: apt-get install chromium).
browser: install
	$(BIN)/python -m tests.support.browser

## ripgrep and universal-ctags on the host, for the tool server's in-process tests (root on Debian: apt-get).
host-tools: install
	$(BIN)/python -m tests.support.host_tools

test: image browser host-tools
	$(BIN)/python -m pytest

test-unit: host-tools
	$(BIN)/python -m pytest -m "not docker and not e2e"

test-docker: image browser
	$(BIN)/python -m pytest -m "docker"

## Real plan runs and a line-mode session against the Anthropic API: about $0.35 a run with
## claude-sonnet-4-6 (docs/development.md). Never part of `make test`; without
## ANTHROPIC_API_KEY the tests are skipped and no image is built.
test-live: install
	@if [ -n "$$ANTHROPIC_API_KEY$$ANTHROPIC_AUTH_TOKEN" ]; then $(MAKE) image; fi
	$(BIN)/python -m pytest --live -m live -rs tests/live

## Two perspectives on examples/demo-repo, played from a recorded conversation: no API key needed.
demo: image
	$(BIN)/planrun plan -f examples/demo-requirements.md --repo examples/demo-repo \
		--perspective simplicity --perspective performance \
		--replay examples/cassettes/due-dates

## Every figure, monorepos of up to a million files included: the first run makes them under
## build/monorepos (minutes), later runs reuse them; PLANRUN_BENCH_MONOREPOS names another place.
bench: image host-tools
	$(BIN)/python benchmarks/run.py

## The same figures, the monorepos of 100,000 and 1,000,000 files left out.
bench-quick: image host-tools
	$(BIN)/python benchmarks/run.py --quick

lint: install
	$(BIN)/ruff check sandbox_runner tests benchmarks
	$(BIN)/ruff format --check sandbox_runner tests benchmarks
	$(BIN)/mypy

clean:
	-$(BIN)/planrun sandbox gc --all 2>/dev/null
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
