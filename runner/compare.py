"""``python -m runner.compare``: the command; the code is :mod:`runner.analysis.compare`."""

from runner.analysis.compare import main

if __name__ == "__main__":
    raise SystemExit(main())
