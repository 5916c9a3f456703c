"""``python -m runner.collect``: the command; the code is :mod:`runner.execution.collect`."""

from runner.execution.collect import main

if __name__ == "__main__":
    raise SystemExit(main())
