# Quick start: `make demo` then `make test`.
.PHONY: demo test setup docs bench typecheck
demo:
	bash scripts/setup.sh embedded
	.venv/bin/notify-transport demo
test:
	bash scripts/test.sh
setup:
	bash scripts/setup.sh
typecheck: setup
	.venv/bin/python -m mypy
docs: setup
	.venv/bin/sphinx-build -n -W -b html doc/source doc/build/html
bench: setup
	bash scripts/rabbitmq.sh
	.venv/bin/python -m bench
