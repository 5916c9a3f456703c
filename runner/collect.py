"""``python -m runner.collect``: the command; the code is :mod:`runner.storage.collect`."""

from runner.storage.collect import main

if __name__ == "__main__":
    raise SystemExit(main())
