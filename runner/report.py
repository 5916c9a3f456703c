"""``python -m runner.report``: the command; the code is :mod:`runner.analysis.report`."""

from runner.analysis.report import main

if __name__ == "__main__":
    raise SystemExit(main())
