# The course's commands. A newcomer needs two: `make lab` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
PORT ?= 8888
# NB: the notebooks `make execute` re-runs, or the one notebook `make test NB=07b` proves.
NB_GIVEN := $(filter command line environment,$(origin NB))
NB ?= notebooks/*.ipynb
ZH_NB := notebooks/zh/*.ipynb
# Running as root (containers, CI) needs JupyterLab's --allow-root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
# Where torch comes from. PyPI's Linux wheels are CUDA builds of several GB; PyTorch's CPU-only
# index gives a 0.2 GB wheel: make install TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
TORCH_FROM := $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX),)

.PHONY: install lab test check lint unit notebooks execute zh bench compat mutate lock clean browser-deps

# Create/refresh .venv from the pins; a no-op when pyproject.toml and constraints.txt are unchanged.
install: $(STAMP) $(LAB_OVERRIDES)
	@.ci/system-packages

# JupyterLab's defaults the course overrides (overrides.json): no "get notified about official
# Jupyter news?" prompt over the first notebook, no update check. postBuild does the same on Binder.
$(LAB_OVERRIDES): overrides.json $(STAMP)
	mkdir -p $(dir $@)
	cp overrides.json $@

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt pip setuptools
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt torch==2.13.0 $(TORCH_FROM)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[dev]"
	touch $(STAMP)

# Open the course in JupyterLab (127.0.0.1 only, token authentication; the URL with the token is printed).
lab: install
	$(BIN)/jupyter lab --ip=127.0.0.1 --port=$(PORT) --ServerApp.root_dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

# Everything: lint, unit tests, the notebook runs, the browser, strict nbval of the committed
# outputs (three CPU kernel sets, and the Chinese twins), side by side on the machine's cores, each
# step timed (tests/runners/steps.py; the README's "What `make test` checks" says what each step proves).
# `make test NB=07b` proves one notebook instead (CONTRIBUTING.md: what each change must run).
test: install browser-deps
	$(BIN)/python -m tests.runners.steps test $(if $(NB_GIVEN),--notebook $(NB))
	@echo "make test$(if $(NB_GIVEN), NB=$(NB)): all checks passed"

# The fast loop for changing the helpers: lint and every unit test that runs no notebook.
check: $(STAMP)
	$(BIN)/python -m tests.runners.steps check

# The browser tests also need chromium (installed here when missing; without it they are skipped
# with a note, or fail under CI=true), and axe-core for the site's accessibility audit (from npm,
# at the version tests/browser/package-lock.json pins; the test injects it from disk).
AXE := tests/browser/node_modules/axe-core/axe.min.js
browser-deps: $(AXE)
	@.ci/system-packages --browser

$(AXE): tests/browser/package.json tests/browser/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "npm not found: the site's accessibility audit is skipped (install Node.js)"; fi

lint: $(STAMP)
	$(BIN)/ruff check helpers tooling tests notebooks site conftest.py

unit: $(STAMP) browser-deps
	$(BIN)/python -m pytest tests -q

# Strict nbval, then again with torch's CPU kernels forced to other instruction sets: outputs that
# a learner's CPU could print differently (AVX-512 here, AVX2 or plain elsewhere) fail here first.
# The Chinese twins run on plain kernels: their outputs carry the English numbers
# (tests/tooling/test_editions.py proves it), so that run covers the third CPU path.
notebooks: $(STAMP)
	$(BIN)/python -m tests.runners.steps test --only nbval-en,nbval-en-avx2,nbval-zh

# Re-run notebooks in place from a fresh kernel, so committed outputs are what the pins produce.
execute: $(STAMP)
	$(BIN)/python -m tooling.course execute $(NB)

# The Chinese edition: rebuild every twin from its English notebook (code, cells; translations
# kept), then run the twins so their outputs speak Chinese. Translators edit only Markdown and
# helpers/text/zh/ (tooling/editions.py says how).
# `make zh NB=notebooks/07b_pipeline_and_data_parallel.ipynb` rebuilds and runs that twin only.
zh: $(STAMP)
	$(BIN)/python -m tooling.editions build $(if $(NB_GIVEN),$(NB))
	$(BIN)/python -m tooling.course execute $(if $(NB_GIVEN),$(addprefix notebooks/zh/,$(notdir $(NB))),$(ZH_NB))

# The course website: both editions, read-only, from the committed notebooks (never re-run), into
# _site/html/ (English at its root, Chinese under zh/). Warnings are errors. site/build.py says how,
# the README's "Website" section why Sphinx; tests/browser/test_site.py checks every page.
.PHONY: site
site: $(STAMP)
	$(BIN)/python site/build.py

# The course as a book: one PDF per edition, printed by Chromium from the site (built first, from
# the committed notebooks), into _site/pdf/. site/pdf.py says how, and why not LaTeX.
.PHONY: pdf
pdf: $(STAMP) browser-deps
	$(BIN)/python site/pdf.py

bench: $(STAMP)
	$(BIN)/python -m tests.runners.bench

# The notebooks and the helpers' unit tests on other torch releases (tests/runners/compat.py says which and
# how); writes COMPATIBILITY.md. Downloads about 5 GB per release: not part of `make test`.
compat: $(STAMP)
	$(BIN)/python -m tests.runners.compat $(COMPAT_ARGS)

# Mutation score of the helpers (tests/runners/mutate.py says which modules and tests); writes MUTATION.md.
# MODULES=helpers/state.py runs one module and prints its survivors instead; STALE=1 measures the
# modules whose code changed since their row (a stale row fails no test: run it in the background).
mutate: $(STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[mutate]"
	$(BIN)/python -m tests.runners.mutate $(if $(MODULES),--survivors $(MODULES)) $(if $(STALE),--stale)

# Re-pin after changing dependencies (review the diff before committing).
lock: $(STAMP)
	$(BIN)/python -m pip freeze --all --exclude-editable | grep -v -E '^(pip)==' \
	  | sed 's/+cpu$$//' | sort -f > constraints.body && \
	  { head -3 constraints.txt; cat constraints.body; } > constraints.new && \
	  rm constraints.body && mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) .artifacts .compat .mutate tests/browser/node_modules
