"""``python -m runner.check``: the command; the code is :mod:`runner.claims.check`."""

from runner.claims.check import main

if __name__ == "__main__":
    raise SystemExit(main())
