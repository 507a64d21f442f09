# Two commands on a fresh machine: `make demo` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# nbgrader shells out to alembic, and nbclient looks for the venv's kernel: the venv's bin goes first.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: demo test venv release validate clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/course demo

test: $(STAMP)
	$(PY) -m pytest

release: $(STAMP)
	$(VENV)/bin/course release transformer-block

validate: $(STAMP)
	$(VENV)/bin/course validate transformer-block

clean:
	rm -rf $(VENV) gradebook.db autograded feedback .demo
