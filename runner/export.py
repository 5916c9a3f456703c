"""``python -m runner.export SWEEP --format json|csv|benchmark-action``: the command; the code
is :mod:`runner.analysis.export`."""

from runner.analysis.export import main

if __name__ == "__main__":
    raise SystemExit(main())
