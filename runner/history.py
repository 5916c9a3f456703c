"""``python -m runner.history RESULTS...``: each trial's time across sweeps and commits."""

from runner.analysis.history import main

if __name__ == "__main__":
    raise SystemExit(main())
