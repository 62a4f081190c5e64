# Duel: two commands for a newcomer.
#   make run   - set up everything on the embedded default and serve http://127.0.0.1:8000
#   make test  - lint and the whole test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint format demo worker clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "Duel needs Python 3.11 or newer (found $$($(PYTHON) --version))"; exit 1; }
	@scripts/system-deps.sh venv
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

run: $(STAMP)
	@scripts/system-deps.sh ffmpeg
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo --site-url http://$(HOST):$(PORT)
	$(PY) manage.py runserver $(HOST):$(PORT)

test: $(STAMP)
	@scripts/system-deps.sh ffmpeg chromium
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

worker: $(STAMP)
	$(VENV)/bin/celery -A duel worker -l INFO

clean:
	rm -rf var/ .pytest_cache
