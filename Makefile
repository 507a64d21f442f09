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

.PHONY: demo test test-unprivileged lint venv release validate clean

venv: $(STAMP)
	$(PY) -m compileall -q autograder

# The editable install leaves the package without bytecode, and where PYTHONDONTWRITEBYTECODE is
# set no command writes it: each would compile every module it imports, tens of milliseconds of a
# one-student run. So the package is compiled here (again by `make venv` after changes; a module
# whose bytecode is stale is compiled in memory, as before).
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	$(PY) -m compileall -q autograder
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/course demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The sandbox and security tests, and `course serve` (its socket is its user's alone), as an unprivileged
# user (CI runs this as root after `make test`):
# a copy of this working tree owned by CI_USER, a venv built there from Debian's python (root's
# pyenv python is unreadable to other users), and pytest run as that user.
CI_USER   ?= course-ci
CI_COPY   ?= /home/$(CI_USER)/course-autograder
CI_PYTHON ?= /usr/bin/python3.11
UNPRIVILEGED_TESTS ?= tests/security tests/sandbox tests/batch/test_serve.py

test-unprivileged:
	@test "$$(id -u)" = 0 || { echo "make test-unprivileged: run it as root (it switches to $(CI_USER))" >&2; exit 2; }
	id -u $(CI_USER) >/dev/null 2>&1 || useradd --create-home --shell /bin/bash $(CI_USER)
	mkdir -p $(CI_COPY)
	find $(CI_COPY) -mindepth 1 -maxdepth 1 ! -name .venv-ci -exec rm -rf {} +
	tar -c --exclude='./.venv*' --exclude=./.git --exclude=./.demo --exclude='__pycache__' \
	    --exclude=./.mypy_cache --exclude=./.ruff_cache \
	    --exclude=./gradebook.db --exclude=./autograded --exclude=./feedback . | tar -x -C $(CI_COPY)
	chown -R $(CI_USER): $(CI_COPY)
	cd / && runuser -u $(CI_USER) -- env PATH=/usr/local/bin:/usr/bin:/bin \
	    HOME="$$(getent passwd $(CI_USER) | cut -d: -f6)" \
	    $(MAKE) -C $(CI_COPY) test PYTHON=$(CI_PYTHON) VENV=.venv-ci PYTEST_ARGS="$(UNPRIVILEGED_TESTS)"

release: $(STAMP)
	$(VENV)/bin/course release $(ASSIGNMENT)

validate: $(STAMP)
	$(VENV)/bin/course validate $(ASSIGNMENT)

# Build products only (every interpreter's environment folder): the course's own data (gradebook.db,
# submitted/, autograded/, feedback/, exports) lives in this folder too and is never removed by a make target.
clean:
	rm -rf $(VENV) .venv .venv-* .mypy_cache .ruff_cache .demo
