"""``python -m runner.resume``: the command; the code is :mod:`runner.storage.resume`."""

from runner.storage.resume import main

if __name__ == "__main__":
    raise SystemExit(main())
