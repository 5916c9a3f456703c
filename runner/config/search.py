"""A sweeper that searches (``hydra/sweeper=optuna``), checked before its first job runs.

Hydra's basic sweeper runs the grid of ``hydra.sweeper.params``, and the pre-flight composes
and plans each of its jobs (``runner.config.preflight``). A search sweeper chooses its points
while it runs, from a space that may be far larger than it will ever visit
(``interval(16, 1024)``), so the pre-flight checks each value of each parameter on its own:
one composed and planned job per value (an interval or a range: its two ends), so a typo in
any value is refused before the first trial, at the cost of the sum of the parameters'
lengths, not their product. It also needs ``objective``: the number each job returns for it
to minimise (``runner.execution.objective``). docs/scale-out.md ("Search instead of a grid").
"""

from __future__ import annotations

from typing import Any

from runner.core.errors import ConfigError

#: The sweeper that runs the grid; any other one chooses its points as it goes.
GRID_SWEEPERS = ("hydra._internal.core_plugins.basic_sweeper.BasicSweeper",)
#: Sweepers that live in a plugin: the extra that installs each (pyproject.toml).
PLUGIN_EXTRAS = {"optuna": "search"}


def is_search(sweeper_target: Any) -> bool:
    """Whether the composed ``hydra.sweeper._target_`` chooses its points at run time."""
    return sweeper_target is not None and str(sweeper_target) not in GRID_SWEEPERS


def check_objective(objective: Any, sweeper_target: Any) -> None:
    """A search minimises what each job returns: without ``objective`` it would get no
    number and stop after the first job."""
    if objective is None:
        name = str(sweeper_target).rpartition(".")[2]
        raise ConfigError(f"the sweeper {name} minimises what each job returns, and "
                          "'objective' is not set. Name the result column to minimise, "
                          "e.g. objective=time_median_us (the loop time) or "
                          "objective=gpu_time_us (the device time, on a GPU).")


def quiet_optuna() -> None:
    """Optuna announces each study on stderr, in colour codes even without a terminal; the
    jobs' own lines say what ran. Its warnings still show."""
    try:
        import optuna
    except ImportError:  # a sweeper of another plugin
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def value_jobs(overrides: list[Any]) -> list[list[str]]:
    """One job per value of each parsed sweep override, each setting that key alone: every
    value of a choice, the two ends of an interval or a range (whose values between are of
    one kind; ``range(0,100000)`` is two checks, not a hundred thousand)."""
    from hydra.core.override_parser.types import Transformer

    jobs = []
    for override in overrides:
        key = override.get_key_element()
        sweep = override.value() if override.is_sweep_override() else None
        if override.is_interval_sweep():
            values = [str(sweep.start), str(sweep.end)]
        elif override.is_range_sweep() and not sweep.shuffle:
            values = [str(sweep.start), str(sweep.stop)]  # Optuna may choose the stop too
        elif override.is_sweep_override():
            values = list(override.sweep_iterator(transformer=Transformer.encode))
        else:
            values = [override.get_value_element_as_str()]
        jobs += [[f"{key}={value}"] for value in values]
    return jobs


def names_search(cmd: Any) -> bool:
    """Whether the command line runs a multirun under a search sweeper
    (``hydra/sweeper=optuna ... -m``)."""
    sweepers = cmd.values_of("hydra/sweeper") or []
    return cmd.multirun and any(str(name) != "basic" for name in sweepers)


def command_line_jobs(cmd: Any) -> list[list[str]]:
    """The jobs the pre-flight checks for a search named on the command line: its fixed
    overrides, plus one value of one swept key at a time (:func:`value_jobs`); the grid of
    its sweeps is never listed."""
    fixed = [ov.input_line for ov in cmd.overrides if not ov.is_sweep_override()]
    swept = [ov for ov in cmd.overrides if ov.is_sweep_override() and not ov.is_hydra_override()]
    return [[*fixed, *extra] for extra in value_jobs(swept)] or [fixed]


def install_hint(group: str, name: str) -> str:
    """`` Install it: pip install 'opsweep[search]'.`` for a plugin's config that is missing
    because its extra is not installed; else empty."""
    extra = PLUGIN_EXTRAS.get(name) if group == "hydra/sweeper" else None
    return f" Install it: pip install 'opsweep[{extra}]'." if extra else ""
