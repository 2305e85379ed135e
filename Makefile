# The two commands a newcomer needs are `make demo` and `make test`; everything
# else here is what they are made of.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export TETHER_TEST_PG_DSN ?= postgresql://postgres@127.0.0.1:5432/test

.PHONY: demo test test-fast lint typecheck pytest bench gen-sync check-sync lock dist clean

$(STAMP): pyproject.toml requirements/constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements/constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m tether.demo

test: $(STAMP) lint typecheck check-sync pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench tools
	$(VENV)/bin/ruff format --check src tests bench tools
	$(VENV)/bin/vulture src tools/vulture_whitelist.py --min-confidence 60

typecheck: $(STAMP)
	$(VENV)/bin/mypy

check-sync: $(STAMP)
	$(PY) tools/gen_sync.py --check

gen-sync: $(STAMP)
	$(PY) tools/gen_sync.py

# The whole suite, on every CPU (pytest-xdist), then the `slow` tests (crash,
# chaos and fault tests that time processes) and the `ui` ones (a headless
# Chromium per test module) on their own, so that a loaded machine does not
# make them flaky.
pytest: $(STAMP)
	$(VENV)/bin/pytest -n auto -m "not slow and not ui" $(PYTEST_ARGS)
	$(VENV)/bin/pytest -m "slow or ui" $(PYTEST_ARGS)

# The quick loop while working: no Postgres, no slow tests, no browser, stop at
# the first failure. `make test` (what CI runs) is the whole suite.
test-fast: $(STAMP)
	$(VENV)/bin/pytest -n auto -x -q -m "not slow and not postgres and not ui" $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m bench $(BENCH_ARGS)

# A wheel and an sdist in dist/, to install tether into another project:
# pip install 'tether[langgraph] @ file:///path/to/dist/tether-<version>-py3-none-any.whl'
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --no-isolation --outdir dist .

lock: $(STAMP)
	$(PY) -m pip freeze --exclude-editable | grep -v '^-e' > requirements/constraints.txt

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache dist
