# The two commands of README.md. Everything they need is installed on first use and cached
# under ~/.cache/baton/ (see dev/bootstrap and dev/stack).
.PHONY: demo test lint stack-up stack-down

demo:
	dev/demo

test:
	dev/test

lint:
	dev/test --lint-only

stack-up:
	dev/stack up

stack-down:
	dev/stack down
