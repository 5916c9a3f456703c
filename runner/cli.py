"""What every opsweep command shares: one form of error and its exit status.

``python -m runner`` and the commands beside it (compare, report, collect, ...) fail on bad
input the same way: one line ``PROG: error: MESSAGE`` on stderr and exit status 2, never a
traceback. Imports only the standard library.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_BAD_ARGS = 2


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (``prog: error: ...``) and exit 2."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {self.prog} --help)", prog=self.prog)


def fail(message: object, prog: str = "opsweep") -> NoReturn:
    """Print ``prog: error: message`` on one line to stderr and exit with status 2."""
    first = " ".join(str(message).split())
    print(f"{prog}: error: {first}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_ARGS)
