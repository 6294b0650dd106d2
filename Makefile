# Two commands do all set-up on a fresh machine:
#   make demo   create .venv, install the runtime dependencies only, serve every app on
#               http://127.0.0.1:7860 (make demo PORT=8000 for another port; a taken port moves
#               to the next free one)
#   make test   the same .venv plus the test extras (pytest, hypothesis, playwright, ruff,
#               Mooncake), a headless Chromium, pytest, then the differential suite against the
#               real SGLang/vLLM code (make test-real)
PYTHON ?= python3
VENV ?= .venv
REAL_VENV ?= .venv-real
PY := $(VENV)/bin/python
PORT ?= 7860
export GRADIO_ANALYTICS_ENABLED := False
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1

.PHONY: demo test test-real chromium libibverbs mooncake-services lint bench figures readme-figures screenshots train clean

# the runtime: what the apps, the figures and kda_core import (pyproject's dependencies)
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e .
	touch $@

# the test extras on top (pyproject's [test]): make test, lint, the browser and Mooncake targets
$(VENV)/.test-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	$(PY) -m apps --port $(PORT)

# Debian's chromium (+ a CJK font) when present or installable as root; playwright's own
# browser download otherwise.
chromium: $(VENV)/.test-installed
	@if command -v chromium >/dev/null 2>&1; then echo "chromium: $$(command -v chromium)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && apt-get install -y -qq chromium fonts-wqy-zenhei; \
	else $(PY) -m playwright install chromium; fi

# Mooncake Store's engine.so links Debian's libibverbs1 even for TCP (kda_core/transfer/mooncake.py)
libibverbs:
	@if ldconfig -p 2>/dev/null | grep -q 'libibverbs.so.1 '; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -qq && apt-get install -y -qq libibverbs1; \
	else echo "libibverbs1 missing: Mooncake tests skip (apt-get install libibverbs1)"; fi

# a Mooncake master + storage node on 127.0.0.1 (Ctrl-C stops them)
mooncake-services: $(VENV)/.test-installed libibverbs
	$(PY) -m kda_core.transfer mooncake-services

# torch (CPU wheel, pinned: never let pip resolve another build), fla-core and transformers for the
# flash-linear-attention cross-check and the Kimi-Linear parity tests
$(VENV)/.reference: $(VENV)/.test-installed
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q --no-deps fla-core==0.6.0 einops
	$(PY) -m pip install -q transformers==5.23.0
	touch $@

test: $(VENV)/.test-installed $(VENV)/.reference chromium libibverbs
	OPENBLAS_NUM_THREADS=1 $(PY) -m pytest
	$(MAKE) --no-print-directory test-real

# tests/real: kda_core against SGLang 0.5.23's and vLLM 0.33.0's own cache code, in a pinned venv
# of its own (tests/real/install.sh; exit 3 = no package registry: skipped with the reason).
test-real:
	@rc=0; PYTHON=$(PYTHON) bash tests/real/install.sh $(REAL_VENV) || rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "test-real: SKIPPED: the real-engine venv cannot be installed here (no package registry)"; exit 0; fi; \
	[ $$rc -eq 0 ] || exit $$rc; \
	OPENBLAS_NUM_THREADS=1 $(REAL_VENV)/bin/python -m pytest -q -p no:cacheprovider -W ignore tests/real

lint: $(VENV)/.test-installed
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: $(VENV)/.test-installed
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Figures go to build/figures (ignored); readme-figures rewrites the committed README figures.
figures: $(VENV)/.installed
	$(PY) -m plots

readme-figures: $(VENV)/.installed
	$(PY) -m plots --out assets/figures

screenshots: $(VENV)/.test-installed chromium
	$(PY) -m apps.screenshots

# Retrain k3-mini (CPU, deterministic, one thread; hours on 2 shared cores) -> assets/weights/k3-mini.npz:
# likelihood training from the random initialisation, then the unlikelihood fine-tune in two stages
# (docs/model.md)
train: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[train]'
	$(PY) -m kda_core.model.train --out build/k3-mini-likelihood.npz
	$(PY) -m kda_core.model.unlikelihood --init build/k3-mini-likelihood.npz --out build/k3-mini-ul1.npz
	$(PY) -m kda_core.model.unlikelihood --init build/k3-mini-ul1.npz --seed 1 --steps 400

clean:
	rm -rf $(VENV) $(REAL_VENV) .pytest_cache .ruff_cache .gradio .hypothesis
