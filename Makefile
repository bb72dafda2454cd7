# Two commands a newcomer needs (see README):
#   make demo   set up .venv, ingest sample_logs/ into the default store (the user-level one unless
#               ./forensics_data/sessions.db exists: `ctxf config show` says which), replay and explain the failed agent run
#   make test   set up .venv and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.ctxf-installed

# torch is pinned in the same pip command as the project: a loose torch requirement
# (sentence-transformers asks torch>=2.2) would otherwise resolve to a multi-GB CUDA build.
TORCH  ?= torch==2.13.0
# On a plain index (PyPI) torch==2.13.0 is the CUDA build: TORCH_INDEX=https://download.pytorch.org/whl/cpu
# adds PyTorch's CPU wheel index to the same pip command (README, "Two commands").
TORCH_INDEX ?=

.PHONY: install demo test docs bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$(TORCH)" -e ".[dev]" $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	# an editable install leaves the package uncompiled; with PYTHONDONTWRITEBYTECODE set every
	# run would compile it from source again (0.1-0.3 s of each cold command, measured)
	$(BIN)/python -m compileall -q context_forensics >/dev/null
	touch $(STAMP)

demo: install
	$(BIN)/ctxf ingest sample_logs --recursive
	$(BIN)/ctxf sessions
	$(BIN)/ctxf replay sample_logs/agent-overflow/shopcart-tiered-discounts.openai.json --model gemma-7b --model gpt-4o-mini
	$(BIN)/ctxf explain sample_logs/agent-overflow/shopcart-tiered-discounts.openai.json --model gemma-7b \
	    --fact "Never modify files under tests/." --fact "Do not touch the tests; they define the contract."

test: install
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

# the docs site into build/site (warnings are errors; the test suite builds it too: tests/test_docs_examples.py)
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: install
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/ingest_scaling.py
	$(BIN)/python bench/replay.py
	$(BIN)/python bench/fidelity.py
	$(BIN)/python bench/drift.py calibrate
	$(BIN)/python bench/diverge.py
	$(BIN)/python bench/scale.py --sizes 1000 --embed-sizes 0
	$(BIN)/python bench/facts.py
	$(BIN)/python bench/ratios.py
	$(BIN)/python bench/embed_threads.py
	$(BIN)/python bench/encoder_options.py
	$(BIN)/python bench/big_export.py
	$(BIN)/python bench/facts.py cold   # issue 17: cold ctxf facts / drift / calibrate subprocesses vs bench/baselines
	$(BIN)/python bench/audit.py
	$(BIN)/python bench/audit.py cold   # issue 17: cold ctxf audit with embedding rules vs bench/baselines
	$(BIN)/python bench/sigkill.py
	$(BIN)/python bench/view.py

clean:
	rm -rf $(VENV) forensics_data .pytest_cache .hypothesis
