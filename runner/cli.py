"""What every opsweep command shares: its name, ``--version`` and one form of error.

``python -m runner`` and the commands beside it (compare, report, collect, ...) fail on bad
input the same way: one line ``PROG: error: MESSAGE`` on stderr and exit status 2, never a
traceback. A command names itself as the user called it (:func:`program`: the installed
``opsweep-compare`` or ``python -m runner.compare``), and every parser built on
:class:`OneLineArgumentParser` answers ``--version`` (:func:`version_text`). Imports only the
standard library.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

EXIT_BAD_ARGS = 2


def program(module: str) -> str:
    """The name a command was called by: its installed script when run as that, else its
    ``python -m`` form. The script is named after the module (pyproject's
    [project.scripts]): ``runner`` is ``opsweep``, ``runner.claims.report`` is
    ``opsweep-claims-report``."""
    name = module.removeprefix("runner").lstrip(".").replace(".", "-")
    script = f"opsweep-{name}" if name else "opsweep"
    return script if Path(sys.argv[0]).stem == script else f"python -m {module}"


class _VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` and exit 0 (read only when asked)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the versions of opsweep, torch, Hydra and Python, and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(version_text())
        parser.exit()


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (``prog: error: ...``) and exit 2, with
    ``--version`` as on every opsweep command."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action=_VersionAction)

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {self.prog} --help)", prog=self.prog)


def fail(message: object, prog: str = "opsweep") -> NoReturn:
    """Print ``prog: error: message`` on one line to stderr and exit with status 2."""
    first = " ".join(str(message).split())
    print(f"{prog}: error: {first}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_ARGS)


def add_wait_option(parser: argparse.ArgumentParser) -> None:
    """``--wait SECONDS``: how long a command that writes a sweep waits for the process that
    holds the sweep's lock (``runner.storage.lock``), for resume and collect alike."""
    parser.add_argument("--wait", type=_wait_seconds, default=0.0, metavar="SECONDS",
                        help="while another process writes the sweep, wait up to SECONDS for "
                             "it (default 0: exit 2 at once)")


def _wait_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"--wait {text}: expected seconds >= 0")
    return seconds


def not_a_sweep(path: Path) -> str:
    """The one message for a path that is not a sweep folder."""
    return f"opsweep: error: {path} is not a directory; pass a sweep folder under results/"


def version_text() -> str:
    """``opsweep --version``: opsweep's version and the versions of what it runs on (read from
    the installed distributions' metadata, so torch is not imported for it)."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    # a checkout (maybe run through PYTHONPATH, not installed) says its version in pyproject
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    found = re.search(r'^version = "([^"]+)"', pyproject.read_text(encoding="utf-8"), re.M) \
        if pyproject.is_file() else None
    ours = f"{found.group(1)} (source checkout)" if found else of("opsweep")
    return (f"opsweep {ours}, torch {of('torch')}, Hydra {of('hydra-core')}, "
            f"Python {sys.version.split()[0]}")
