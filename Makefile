# riak-events: set up and run.
#   make run    install what is missing, then run the main job on the devnode
#   make test   install what is missing (apt packages, virtualenv, the package with its
#               compiled extension, dev tools), then lint, type-check and run every test
#   make lint   ruff + mypy only
#   make unit   the unit tests only (tests/unit: no process, no fork, no external program)
#   make check  before a commit: lint, the unit tests and the contract suite (one devnode
#               on loopback), on the virtualenv as it is: no network, no containers
#   make bench  every benchmark in bench/ in a short mode, one table (bench/report.py)
#
# A test's lane is its folder (tests/unit, tests/integration, tests/contract, tests/e2e,
# tests/interop, tests/fuzz, tests/perf): tests/conftest.py gives it the marker of that
# name, and fails a unit test that starts a process.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Debian packages the project needs: Perl's Sereal (an independent implementation the
# codec is tested against).
# Erlang/OTP: the ring hash is checked against a real erl, and the hook is built with erlc.
# ZooKeeper (and a Java runtime for it): relocator ownership, the substream registry.
# Chromium: the companion status page is checked in a real headless browser.
# systemd: systemd-analyze checks the units in deploy/systemd.
# iproute2: the chaos campaign (bench/chaos.py) cuts the devnode's link with ip netns.
# podman (with runc, netavark, aardvark-dns, and iptables, which netavark runs) serves the
# Docker Engine API for the container tests (tests/e2e/test_containers.py,
# deploy/podman/containers.conf); debootstrap makes their base image without a registry.
# prometheus: promtool checks and unit-tests deploy/prometheus/riak-events-rules.yml (its
# service is not started where policy-rc.d refuses, as in containers; on a host with
# systemd it listens on :9090, which no test uses).
# valgrind: the codec's instruction-count guard (tests/perf) counts with callgrind.
APT_PACKAGES := libsereal-encoder-perl libsereal-decoder-perl libjson-pp-perl erlang-nox \
	zookeeper default-jre-headless chromium systemd iproute2 \
	podman runc netavark aardvark-dns iptables debootstrap prometheus valgrind

.PHONY: run test lint unit check bench system-deps preflight venv testdata clean

# The main job on the embedded default (the devnode): scripts/main_job.py says what it does.
run: venv
	$(BIN)/python scripts/main_job.py

test: preflight venv lint testdata
	$(BIN)/pytest

# Sereal's own test data, from Debian's source package of the Perl decoder (not committed).
testdata: system-deps
	sh tests/interop/fetch_testdata.sh

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -m unit

# Nothing is installed here (make test or make venv does that once): an offline lane.
check:
	@test -x $(BIN)/pytest || { echo "no virtualenv in $(VENV): run make test once"; exit 2; }
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -q tests/unit tests/contract

bench: venv
	$(BIN)/python bench/report.py

system-deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# One line per external program the suite runs that this machine lacks, with its Debian
# package (scripts/preflight.py holds the list), before anything is built or run.
preflight: system-deps
	$(PYTHON) scripts/preflight.py

# The stamp depends on everything that changes what gets installed or built.
$(VENV)/.installed: pyproject.toml setup.py $(wildcard sereal_codec/csrc/* relocator/csrc/* consumer_lib/csrc/*) | system-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,spark]'
	touch $@

venv: system-deps $(VENV)/.installed

clean:
	rm -rf $(VENV) build *.egg-info sereal_codec/*.so relocator/*.so consumer_lib/*.so
