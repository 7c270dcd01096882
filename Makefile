# Every target installs what it needs first; `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTEST_ARGS ?=
# V=1 shows what pip, apt/debconf and the JVM say; by default only their errors reach the terminal
V ?=
PIP_QUIET := $(if $(V),,-qq)
QUIET_ENV := $(if $(V),,PYTHONWARNINGS=ignore PIP_DISABLE_PIP_VERSION_CHECK=1)

.PHONY: help install system-deps stubs disklayer disklayer-test disklayer-lint image test check lint demo bench clean

help:
	@echo "make demo     install everything, then run the main job (see README)"
	@echo "make test     install everything, then run the whole test suite"
	@echo "make check    the inner loop: the fast tier (no Docker, Spark, root, Chromium or real clusters), both cores"
	@echo "make lint     ruff and ruff format over the tree, the layer contract (import-linter), the types (mypy), rustfmt and clippy"
	@echo "make image    build (or reuse) the node image"
	@echo "make bench    run the benchmarks (results go to docs/benchmarks.md by hand)"
	@echo "V=1           (with any target) show pip's, apt's and the JVM's own output"

system-deps:
	@VERBOSE=$(V) bash scripts/system-deps.sh

$(VENV)/.installed: pyproject.toml setup.py checkers/_wgl.c checkers/elle/_scc.c checkers/elle/_append.c history/_jsonl.c
	$(PYTHON) -m venv $(VENV)
	$(QUIET_ENV) $(PY) -m pip install $(PIP_QUIET) --upgrade pip setuptools wheel
	$(QUIET_ENV) $(PY) -m pip install $(PIP_QUIET) -e '.[dev]'
	touch $@

install: system-deps $(VENV)/.installed stubs disklayer

# The disk layer (cluster/disklayer-rs, Rust on the fuser crate; docs/disk.md): only runs with a disk fault
# need it, so a machine without cargo gets a note, not a failure.
disklayer:
	@if command -v cargo >/dev/null 2>&1; then \
	  cargo build --release --quiet --locked --manifest-path cluster/disklayer-rs/Cargo.toml --target-dir build/disklayer; \
	else echo "disklayer: cargo not found; runs with a disk fault (lose-unfsynced) will be refused"; fi

# The disk layer's own checks: its unit tests (`make test`), rustfmt and clippy (`make lint`). They share
# build/disklayer with the release build; without cargo they are skipped with a note.
DISKLAYER_CARGO := --manifest-path cluster/disklayer-rs/Cargo.toml
disklayer-test:
	@if command -v cargo >/dev/null 2>&1; then \
	  cargo test --quiet --locked $(DISKLAYER_CARGO) --target-dir build/disklayer; \
	else echo "disklayer-test: cargo not found; the disk layer's unit tests are skipped"; fi

disklayer-lint:
	@if command -v cargo >/dev/null 2>&1; then \
	  cargo fmt --check $(DISKLAYER_CARGO) && \
	  cargo clippy --quiet --locked $(DISKLAYER_CARGO) --target-dir build/disklayer --all-targets -- -D warnings; \
	else echo "disklayer-lint: cargo not found; rustfmt and clippy are skipped"; fi

stubs: $(VENV)/.installed
	@$(PY) -c "from faultline.node.protos._compile import compile_protos; compile_protos()"

image: install
	@if [ -f cluster/image.py ]; then $(VENV)/bin/faultline cluster image --every-db; fi

# Three passes, every test once: what needs no Docker, Spark, root or Chromium spread over the cores
# (pytest-xdist); what is light enough to share the machine (marked `paired`: the chaos cells of real
# databases, tests/chaos_cells.py, and the cluster tests with placeholder daemons) three at a time; then
# the rest one at a time (a store cluster keeps both cores busy, and timed cells must not share them).
# --durations names the slowest, for the CI log. The disk layer's unit tests, rustfmt and clippy run first
# (cargo), so CI checks the crate as `make lint` does; tests/test_style.py checks ruff and ruff format.
ALONE_MARKS := docker or spark or root or chromium
test: install image disklayer-test disklayer-lint
	$(VENV)/bin/pytest --chaos -n $(or $(JOBS),auto) -m "not ($(ALONE_MARKS))" --durations=15 $(PYTEST_ARGS)
	$(VENV)/bin/pytest --chaos -n 3 --dist worksteal -m "paired" --durations=15 $(PYTEST_ARGS)
	$(VENV)/bin/pytest --chaos -m "($(ALONE_MARKS)) and not paired" --durations=30 $(PYTEST_ARGS)

# The fast tier: every test but those needing Docker, Spark, root or Chromium, and the integration tests
# that start real processes (`make test` runs them all). Spread over the cores by pytest-xdist. The disk
# layer's unit tests first: under a second once built (the first debug build takes about half a minute).
CHECK_MARKS := not docker and not spark and not root and not chromium and not slow and not integration
check: $(VENV)/.installed stubs disklayer-test
	$(VENV)/bin/pytest -q -p no:cacheprovider -n $(or $(JOBS),auto) -m "$(CHECK_MARKS)" $(PYTEST_ARGS)

lint: $(VENV)/.installed disklayer-lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) scripts/typecheck.py

demo: install image
	@$(VENV)/bin/faultline campaign campaigns/demo.toml $(if $(V),--verbose); status=$$?; \
	echo "faultline is installed in $(VENV)/bin; to run it by name: export PATH=\"$$PWD/$(VENV)/bin:\$$PATH\""; \
	exit $$status

bench: install
	$(PY) -m benchmarks

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache node/protos/*_pb2*.py checkers/*.so checkers/elle/*.so
