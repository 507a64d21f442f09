# Two commands on a fresh machine: `make demo` and `make test`.
#
# PYTHON is the interpreter the virtual environment is built from (default: python3). Each
# interpreter gets its own environment folder, so `make test PYTHON=/usr/bin/python3.11` builds
# and uses .venv-usr-bin-python3.11 beside the default .venv. VENV overrides the folder.
PYTHON ?= python3
ifeq ($(PYTHON),python3)
VENV   ?= .venv
else
VENV   ?= .venv$(subst /,-,$(if $(filter /%,$(PYTHON)),,/)$(PYTHON))
endif
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# release/validate: one assignment from course.yml (ASSIGNMENT=name), or every one when unset.
ASSIGNMENT ?=
# nbgrader shells out to alembic, and nbclient looks for the venv's kernel: the venv's bin goes first.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: demo test lint venv release validate clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/course demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest

release: $(STAMP)
	$(VENV)/bin/course release $(ASSIGNMENT)

validate: $(STAMP)
	$(VENV)/bin/course validate $(ASSIGNMENT)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache gradebook.db autograded feedback .demo
