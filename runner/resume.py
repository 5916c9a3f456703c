"""``python -m runner.resume``: the command; the code is :mod:`runner.execution.resume`."""

from runner.execution.resume import main

if __name__ == "__main__":
    raise SystemExit(main())
