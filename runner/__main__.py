"""``python -m runner [key=value ...] [-m]``: run a sweep.

The command line is parsed once and checked before Hydra runs anything
(``runner.config.overrides``): each override by its key's declared rule, then every job of a
multirun composed and planned, which checks each axis value (``runner.config.planner``). So a
typo in any job fails with exit status 2 before the first trial runs and before any result
directory is created.
"""

from __future__ import annotations

from runner.execution import timeline  # first: its import time is the "main" mark

# isort: split
import os
import sys
from multiprocessing import current_process
from pathlib import Path

from runner.config.early_workers import WorkerRequest, early_request
from runner.core.bytecode import cache_bytecode
from runner.core.bytecode import setting_error as bytecode_setting_error

#: The workers started before Hydra was imported, by what the raw arguments plainly ask for
#: (runner.config.early_workers); None when none were.
EARLY: WorkerRequest | None = None
# Run as the command (`python -m runner`, or the `opsweep` script), not in a worker: a spawned
# worker runs the `opsweep` script again, with the same arguments, to start; it has its own
# process name by then, which tells it apart.
if (__name__ == "__main__" or Path(sys.argv[0]).name == "opsweep") and \
        current_process().name == "MainProcess":
    if (refused := bytecode_setting_error()) is not None:
        from runner.cli import fail

        fail(refused)  # before any worker starts
    cache_bytecode("hydra")  # installed as torch was: compiled once, not in every command
    EARLY = early_request(sys.argv[1:])
    if EARLY is not None:  # their torch import starts before Hydra is imported
        from runner.execution.pool import prestart

        prestart(*EARLY.arguments)
        timeline.mark("spawned")

# isort: split
import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from runner.cli import fail, version_text  # noqa: E402
from runner.config import hydra_lists, hydra_reuse, schema  # noqa: E402
from runner.config.commandline import CommandLine, parse_command_line  # noqa: E402
from runner.config.guards import guard_hydra_record  # noqa: E402
from runner.config.ops import CONF_DIR  # noqa: E402
from runner.config.overrides import check_overrides  # noqa: E402
from runner.config.preflight import check_job_count, preflight  # noqa: E402
from runner.config.yaml_size import check_config_files  # noqa: E402
from runner.core.errors import ConfigError  # noqa: E402

schema.register()


# An absolute path: Hydra reads a relative one against the calling module, which for the
# installed `opsweep` script is a package (runner) and not this file's folder.
@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _hydra_main(cfg: DictConfig) -> object:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from runner.execution import launched

    # a job submitit or Ray started in a process of its own: its worker first
    target = OmegaConf.select(HydraConfig.get(), "launcher._target_", default=None)
    launched.prestart_worker(cfg, launched.launcher_name(target))
    from runner.execution.job import run_job  # the job's code: keep `--help` fast

    path = run_job(cfg)
    if cfg.get("objective"):  # a search sweeper (hydra/sweeper=optuna) minimises this
        from runner.execution.objective import job_objective

        number = OmegaConf.select(HydraConfig.get(), "job.num", default=0)
        return job_objective(path, cfg.objective, f"job {number}")
    return path


def main() -> None:
    args = sys.argv[1:]
    if "--version" in args:  # before the parse: Hydra's parser would print only its own
        print(version_text())
        return
    if args[:1] == ["--columns"]:  # the column reference, from the schema: no parse
        _print_columns(args[1:])
        return
    if args == ["--docs"]:
        from runner.config.help import docs_listing
        from runner.core.install import DOCS_DIR

        print(docs_listing(DOCS_DIR))
        return
    hydra_lists.install()  # before the first override is parsed
    hydra_reuse.install()  # one parse and one composition, shared with Hydra's run
    try:
        cmd = parse_command_line(args)
        timeline.mark("parsed")
        if cmd.runs_trials:
            check_job_count(cmd)  # before a huge -m sweep's values are listed or checked
        check_config_files(cmd)  # an alias bomb or a deep file, before anything loads it
        sys.argv[1:] = cmd.argv  # flags first: Hydra's parser wants overrides last
        if cmd.runs_trials:
            _prestart(cmd)
            timeline.mark("spawned")
        if not (cmd.flags.help or cmd.flags.hydra_help or cmd.flags.shell_completion):
            check_overrides(cmd)
        if cmd.flags.help:
            _help_page(cmd)
        if cmd.runs_trials:
            timeline.mark("checked")
            if not preflight(cmd):  # a launcher runs every job in a process of its own
                _stop_workers()
            timeline.mark("preflight")
    except ConfigError as exc:
        fail(exc)
    guard_hydra_record()  # a full disk while Hydra writes .hydra: exit 1, no traceback
    try:
        _hydra_main()
    finally:
        hydra_reuse.forget()
    from runner.execution.callbacks import MERGE_FAILED

    if MERGE_FAILED:
        raise SystemExit(1)


def _print_columns(words: list[str]) -> None:
    """``opsweep --columns [WORD]``: every result column (or those whose name holds WORD)."""
    if len(words) > 1:
        fail(f"--columns takes at most one word to look for, got {' '.join(words)!r}; "
             "e.g. opsweep --columns gpu_time")
    from runner.storage.column_reference import text_reference

    try:
        text = text_reference(words[0] if words else "")
    except ValueError as exc:
        fail(exc)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `opsweep --columns | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _help_page(cmd: CommandLine) -> None:
    """``--help``: the page with every launcher Hydra can run (its plugins found only now,
    not on every start), and with ``op=NAME``, that op's parameters first."""
    from runner.config import help
    from runner.config.schema import RunConfig

    ops = cmd.values_of("op")
    help.register(CONF_DIR, RunConfig, op=str(ops[0]) if ops else None,
                  launchers=help.launcher_options())


def _prestart(cmd: CommandLine) -> None:
    """Start the trial workers first, before the overrides are checked, every job is composed
    and planned (a device check imports torch), and Hydra runs: their torch import and
    CUDA context run on other cores meanwhile (runner.execution.pool). ``workers=N`` starts
    a pool. A bad command line stops them again (exit 2). A plain command line started its
    workers already, before Hydra was imported (top of this module): the same request
    starts nothing more; another one starts what it asks for."""
    request = WorkerRequest.parsed(cmd)
    if request is None or request == EARLY:
        return
    from runner.execution.pool import prestart

    prestart(*request.arguments)


def _stop_workers() -> None:
    """Stop the workers started early: no job of this sweep runs in this process."""
    from runner.execution import pool, worker

    pool.stop_pool()
    worker.supervisor().stop()


if __name__ == "__main__":
    main()
