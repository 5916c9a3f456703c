"""``python -m runner [key=value ...] [-m]``: run a sweep.

The command line is checked before Hydra composes anything (``runner.config.overrides``), so a
typo in any job of a multirun fails with exit status 2 before the first trial runs and before any
result directory is created.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from runner.cli import fail
from runner.config import schema
from runner.config.errors import ConfigError
from runner.config.guards import check_args
from runner.config.ops import CONF_DIR
from runner.config.overrides import check_command_line

schema.register()


# An absolute path: Hydra reads a relative one against the calling module, which for the
# installed `opsweep` script is a package (runner) and not this file's folder.
@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _hydra_main(cfg: DictConfig) -> object:
    from runner.execution.job import run_job  # imports torch: keep `--help` fast

    return run_job(cfg)


def main() -> None:
    try:
        check_args(sys.argv[1:])
        check_command_line(sys.argv[1:])
    except ConfigError as exc:
        fail(exc)
    _help_for_op(sys.argv[1:])
    if _runs_trials(sys.argv[1:]):
        # Start the trial worker now: its torch import runs on another core while Hydra
        # composes the config and the driver plans the job (runner.execution.worker).
        from runner.execution.worker import supervisor

        supervisor().prestart()
    _hydra_main()
    from runner.execution.callbacks import MERGE_FAILED

    if MERGE_FAILED:
        raise SystemExit(1)


#: Hydra flags after which no trial runs (help, config printing, completion).
_NO_TRIALS = ("-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--version",
              "--shell-completion", "-sc")


def _help_for_op(args: list[str]) -> None:
    """``op=NAME --help``: put that op's parameters on the help page."""
    ops = [a.partition("=")[2] for a in args if a.startswith("op=")]
    if ops and any(a in ("-h", "--help") for a in args):
        from runner.config import help

        help.register(CONF_DIR, op=ops[-1])


def _runs_trials(args: list[str]) -> bool:
    """Whether to prestart the one trial worker (``workers=N`` starts its own pool)."""
    return not any(a.partition("=")[0] in _NO_TRIALS for a in args) \
        and "isolation=none" not in args \
        and not any(a.startswith("workers=") and a != "workers=1" for a in args)


if __name__ == "__main__":
    main()
