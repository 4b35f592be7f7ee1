# Two commands: `make demo` and `make test`. Both create the venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_DIR ?= demo-out

.PHONY: venv demo test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[cpu,dev]'
	$(PY) -m tfpipe.native build || echo "tfpipe: native ops not built; using the pure-TF fallback"
	touch $@

venv: $(VENV)/.installed

demo: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" bash scripts/demo.sh $(DEMO_DIR)

test: venv
	$(PY) -m pytest -n 2 -q tests

clean:
	rm -rf $(DEMO_DIR) bench-out
