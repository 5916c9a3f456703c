"""``python -m runner.experiments``: the experiments report (``docs/experiments.md``); the code
is :mod:`runner.claims.report`."""

from runner.claims.report import main

if __name__ == "__main__":
    raise SystemExit(main())
