# Two commands: `make demo` and `make test`. Both create the venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_DIR ?= demo-out

.PHONY: venv native demo test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[cpu,dev]'
	# only the protos are used; its `tensorflow` requirement would pull a second TF beside tensorflow-cpu
	$(PY) -m pip install -q --no-deps 'tensorflow-serving-api>=2.16,<3'
	touch $@

venv: $(VENV)/.installed

# The native kernels are required for testing: a broken C++ build must fail here,
# not turn into skipped tests. Ahead of time, next to the package (a pip-installed
# tfpipe builds them on first use instead); rebuilt only when a .cc or .h, the
# colour-chain op table, TF or the flags change (their hash is in the library's name).
native: venv
	@$(PY) -m tfpipe.native build || { \
	  echo "make: the tfpipe native kernels did not build; the compiler error is above."; \
	  echo "      Fix it (or install a C++17 compiler: apt-get install g++), then rerun"; \
	  echo "      '$(PY) -m tfpipe.native build --verbose'. Tests need the library."; \
	  exit 1; }
	@$(PY) -m tfpipe.records build || { \
	  echo "make: the columnar table encoder (plain C, tfpipe/records/_columnar.c) did not build;"; \
	  echo "      the compiler error is above (install a C compiler: apt-get install gcc)."; \
	  exit 1; }

demo: venv
	-@$(PY) -m tfpipe.native build >/dev/null 2>&1 || echo "tfpipe: native ops not built; the demo uses the pure-TF fallback"
	PATH="$(abspath $(VENV))/bin:$$PATH" bash scripts/demo.sh $(DEMO_DIR)

test: native
	$(PY) -m pytest -n 2 --dist loadgroup --no-loadscope-reorder -q tests

clean:
	rm -rf $(DEMO_DIR) bench-out
