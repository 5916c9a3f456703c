"""Compose and plan every job of a sweep before the first one runs.

Hydra composes a multirun's jobs one by one, after it has written ``multirun.yaml``, and a job
whose experiment file, op or override does not compose stops the sweep with Hydra's own message
and exit status 1, after the jobs before it ran. Here every job is composed with Hydra's own
composition (the same config search path, ``--config-dir`` included) and planned, first:
Hydra's merge and struct errors become opsweep's message naming the key, the value and the fix
(:class:`ConfigError`, exit status 2), and nothing is on disk yet.

Hydra then reuses this work (``runner.config.hydra_reuse``): a single run's config is composed
here only, and a multirun's jobs that differ only in plain values (``seed=range(100)``) are
composed once per group, each job checked on its own values; those that differ only in
trial-axis values (``seed=range(10000)``) are checked value by value and planned when launched
(``runner.config.job_values``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from runner.config import hydra_reuse, job_values, search, sweep_size
from runner.config.commandline import CommandLine
from runner.config.hydra_errors import explain
from runner.config.launchers import check_ray_request, runs_here
from runner.config.ops import CONF_DIR
from runner.core.errors import ConfigError

#: With more jobs than this, the sweep's estimated size is said after the first job is
#: checked (composing them all takes ~0.1 s each), and the exact one after all of them.
SAY_EARLY_JOBS = 20

#: Launchers that run jobs on this machine: only there can the driver plan devices.
LOCAL_LAUNCHERS = ("hydra._internal.core_plugins.basic_launcher.BasicLauncher",)


def preflight(cmd: CommandLine, conf_dir: Path = CONF_DIR) -> bool:
    """Compose and plan each job of ``cmd``; :class:`ConfigError` for the first bad one.
    Returns whether any job runs in this process (False: a multirun whose launcher, chosen
    by an experiment too, runs every job in a process of its own, starting its own workers).

    Says the sweep's size on stderr before it starts (``runner.config.sweep_size``): the jobs
    are counted before they are listed, and a sweep past ``max_trials`` stops here, exit 2."""
    from hydra.core.global_hydra import GlobalHydra

    check_job_count(cmd)
    searching = search.names_search(cmd)  # its jobs: each value of the space, not the grid
    jobs = search.command_line_jobs(cmd) if searching else cmd.job_overrides()
    hydra = _hydra(cmd, conf_dir)
    # a multirun's jobs that differ only in values are composed once, here and in Hydra
    hydra_reuse.share_bases() if cmd.multirun else hydra_reuse.forget()
    counts: list[int] = []
    timer: Any = None
    empty: list[str] = []  # the shards with no trial (an array job's spare task)
    shared = _Shared() if cmd.multirun else None
    try:
        for number, job in enumerate(jobs):
            where = f"job {number} ({' '.join(job)}): " if len(jobs) > 1 else ""
            where = f"in the search space ({' '.join(job)}): " if searching else where
            try:
                count, limit, timer, no_trials = _check_job(hydra, cmd, job, conf_dir,
                                                            shared=shared)
                hydra_reuse.mark_checked(job)
                empty += no_trials
                if count is None:
                    continue
                counts.append(count)
                if number == 0 and len(jobs) > 1 and not searching:  # refused now, not later
                    sweep_size.check_trials(count * len(jobs), limit, timer, jobs=len(jobs),
                                            estimated=True)
                if number == 0 and len(jobs) > SAY_EARLY_JOBS and not searching:  # a while
                    _say(sweep_size.size_line([count] * len(jobs), timer, estimated=True))
            except ConfigError as exc:
                raise ConfigError(f"{where}{exc}") from None
            except Exception as exc:  # Hydra's and OmegaConf's errors, in opsweep's words
                raise ConfigError(f"{where}{explain(exc)}") from None
        if searching:
            _say(f"opsweep: search: {len(jobs)} value(s) of the space checked; the sweeper "
                 "chooses the points it runs (hydra.sweeper.n_trials)")
        elif counts:
            sweep_size.check_trials(sum(counts), limit, timer, jobs=len(counts))
            # one job says its size once planned (runner.execution.job): an error only the
            # job can find (its workers) then comes first, alone
            if len(jobs) > 1 and (len(jobs) <= SAY_EARLY_JOBS or len(set(counts)) > 1):
                _say(sweep_size.size_line(counts, timer))
    finally:
        GlobalHydra.instance().clear()
    if jobs and len(empty) == len(jobs):
        # not an error (an array job may have more tasks than trials), and no folder for it
        print(f"opsweep: nothing to run: {empty[0]} has no trials (shard i runs the trials "
              "whose index is i modulo num_shards); no sweep folder made.", file=sys.stderr)
        raise SystemExit(0)
    return bool(counts) or not cmd.multirun  # a single run: Hydra runs it here, whatever


def check_job_count(cmd: CommandLine) -> None:
    """Every job has a trial at least: more jobs than ``max_trials`` is refused before the
    jobs are listed or their values checked (``-m seed=range(0,1000000)``: milliseconds).
    A search runs the points its sweeper chooses, never its grid: not counted here. A sweep
    without ``-m`` is refused here too, counted and not listed, with a fix that passes this
    check (:func:`runner.config.sweep_size.needs_multirun`)."""
    if search.names_search(cmd):
        return
    limit = sweep_size.trial_limit(cmd)
    for override in cmd.overrides if not cmd.multirun else ():
        if override.is_sweep_override() and not override.is_hydra_override():
            raise sweep_size.needs_multirun(override, limit)
    n_jobs = sweep_size.job_count(cmd)
    if n_jobs > limit:
        sweep_size.check_trials(n_jobs, limit, None, jobs=n_jobs, estimated=True,
                                fix=sweep_size.jobs_fix(cmd, limit, n_jobs))


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _hydra(cmd: CommandLine, conf_dir: Path) -> Any:
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.global_hydra import GlobalHydra

    from runner.config import schema

    schema.register()  # base_config, as python -m runner registers it
    # the search path exactly as hydra.main makes it: Hydra's run then takes the config
    # composed here (runner.config.hydra_reuse)
    search_path = create_config_search_path(str(conf_dir))
    if cmd.flags.config_dir:
        search_path.prepend(provider="command-line",
                            path=f"file://{os.path.abspath(cmd.flags.config_dir)}",
                            anchor=SearchPathQuery(provider="schema"))
    GlobalHydra.instance().clear()
    return Hydra.create_main_hydra2(task_name="runner", config_search_path=search_path)


@dataclass
class _Shared:
    """What the jobs of one multirun share in its check: the composed config of each group
    of jobs that differ only in plain values (:func:`runner.config.hydra_reuse.plain_part`),
    with its launcher and whether it runs here, and the ``results_dir`` values already
    checked."""

    configs: dict[Any, tuple[DictConfig, Any]] = field(default_factory=dict)
    #: the plain override text of each key that each group's config holds now
    applied: dict[Any, dict[str, str]] = field(default_factory=dict)
    #: each group's job checked whole, that its others are checked against by their values
    checked: dict[Any, job_values.CheckedJob | None] = field(default_factory=dict)
    results_dirs: set[str] = field(default_factory=set)


def _check_job(hydra: Any, cmd: CommandLine, job: list[str], conf_dir: Path,
               expand: bool = True,
               shared: _Shared | None = None) -> tuple[int | None, Any, Any, list[str]]:
    """Compose and plan one job: (its trial count or None where its launcher runs it on
    another machine, its ``max_trials``, its timer settings, ``["shard i of n"]`` when its
    shard has no trial).
    ``expand``: an experiment's ``hydra.sweeper.params`` jobs are composed and planned too.

    Without ``-m`` Hydra then runs the config composed here (``runner.config.hydra_reuse``):
    a 5000-shape list costs one composition, not three. With ``shared``, a job that differs
    from one checked before only in plain values (``seed=57``) is checked on that job's
    config with its own values set, as Hydra's composition sets them, not composed again."""
    from hydra.types import RunMode

    _, plain, key = hydra_reuse.plain_part(hydra.config_loader, job)
    if shared is not None and key in shared.configs:
        cfg, launcher, devices_here = shared.configs[key]
        applied = shared.applied[key]  # the values cfg holds: only the others are set
        hydra_reuse.apply_values(cfg, [o for o in plain
                                       if applied.get(o.key_or_group) != o.input_line])
        applied.update((o.key_or_group, o.input_line) for o in plain)
        like = shared.checked.get(key)
        alike = None if like is None else job_values.check_alike(like, cfg, plain)
        return alike or _check_task(cfg, job, launcher, devices_here, conf_dir, shared)
    config_name = cmd.flags.config_name or "config"
    cfg = hydra.compose_config(config_name, job,
                               run_mode=RunMode.MULTIRUN if cmd.multirun else RunMode.RUN,
                               with_log_configuration=False)
    launcher = OmegaConf.select(cfg, "hydra.launcher._target_")
    check_ray_request(launcher, OmegaConf.select(cfg, "hydra.launcher.ray"))
    devices_here = runs_here(launcher, OmegaConf.select(cfg, "hydra.launcher.ray.init.address"))
    params = OmegaConf.select(cfg, "hydra.sweeper.params") if cmd.multirun and expand else None
    sweeper = OmegaConf.select(cfg, "hydra.sweeper._target_")
    if cmd.multirun and expand and search.is_search(sweeper):
        search.check_objective(cfg.get("objective"), sweeper)
        search.quiet_optuna()
    if params:  # an experiment's sweep: its jobs are composed and planned here too
        _check_sweeper_jobs(hydra, cmd, job, conf_dir, params,
                            OmegaConf.select(cfg, "hydra.runtime.choices.experiment"),
                            by_value=search.is_search(sweeper))
    elif shared is not None and hydra_reuse.shareable(cfg, plain):
        shared.configs[key] = (cfg, launcher, devices_here)
        shared.applied[key] = {o.key_or_group: o.input_line for o in plain}
    hydra_node = cfg.hydra
    with open_dict(cfg):
        del cfg["hydra"]  # the checks read the job's own config, as Hydra's job gets it
    checked = _check_task(cfg, job, launcher, devices_here, conf_dir, shared)
    if shared is not None and key in shared.configs and not checked[3]:
        shared.checked[key] = job_values.checked_job(cfg, plain, *checked[:3])
    if not cmd.multirun:  # Hydra runs this very config: its hydra node back (a small copy)
        with open_dict(cfg):
            cfg["hydra"] = hydra_node
        hydra_reuse.hand_over(config_name, job, hydra.config_loader.config_search_path, cfg)
    return checked


def _check_task(cfg: DictConfig, job: list[str], launcher: Any, devices_here: bool,
                conf_dir: Path, shared: _Shared | None = None
                ) -> tuple[int | None, Any, Any, list[str]]:
    """The checks of one composed job's own config (``hydra`` removed): :func:`_check_job`.
    ``devices_here``: its devices resolve against this machine's GPUs
    (:func:`runner.config.launchers.runs_here`)."""
    from runner.config.guards import check_job, check_results_dir
    from runner.config.planner import plan_job, remember

    _check_experiment_package(cfg)
    results_dir = str(cfg.results_dir)
    if shared is None or results_dir not in shared.results_dirs:
        check_results_dir(results_dir)  # makes and removes a folder: once per value
        if shared is not None:
            shared.results_dirs.add(results_dir)
    limit, timer = cfg.get("max_trials"), OmegaConf.to_container(cfg.timer, resolve=True)
    planned = plan_job(cfg, conf_dir, devices_here=devices_here)
    check_job(cfg, planned, None)
    if launcher not in (None, *LOCAL_LAUNCHERS):  # the job plans again in its own process
        return None, limit, timer, []
    remember(job, planned)
    sharded = cfg.get("num_shards", 1) > 1 and not planned
    return len(planned), limit, timer, [f"shard {cfg.shard} of {cfg.num_shards}"] if sharded else []


def _check_sweeper_jobs(hydra: Any, cmd: CommandLine, job: list[str], conf_dir: Path,
                        params: Any, experiment: str | None, by_value: bool = False) -> None:
    """``hydra.sweeper.params`` of an experiment (``dtype: fp32,fp8``): Hydra's sweeper makes
    them jobs after these checks, so a bad value ran the jobs before it and left the sweep
    folder behind. Each of its jobs is composed and planned here, named by its file; for a
    search (``by_value``), each value of each parameter (``runner.config.search``)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = {text.partition("=")[0] for text in job}  # the command line wins, as in Hydra
    texts = [f"{key}={value}" for key, value in params.items() if str(key) not in given]
    where = f"in experiment/{experiment}.yaml" if experiment else "in the config"
    try:
        parsed = OverridesParser.create().parse_overrides(texts)
        jobs = search.value_jobs(parsed) if by_value else \
            BasicSweeper.split_arguments(parsed, None)[0]
        for extra in jobs:
            _check_job(hydra, cmd, [*job, *extra], conf_dir, expand=False)
    except ConfigError as exc:
        raise ConfigError(f"{where} (hydra.sweeper.params): {exc} Fix the value in that "
                          "file, or override it on the command line.") from None
    except Exception as exc:  # the grammar's and Hydra's own errors
        raise ConfigError(f"{where} (hydra.sweeper.params): {explain(exc)}") from None


def _check_experiment_package(cfg: DictConfig) -> None:
    """An experiment file without ``# @package _global_`` lands under ``experiment.`` and
    would silently change nothing."""
    node = cfg.get("experiment")
    if isinstance(node, DictConfig) and len(node):
        keys = ", ".join(str(k) for k in node)
        raise ConfigError(f"invalid value for 'experiment': its keys ({keys}) landed under "
                          "'experiment.' instead of the top level, so they would change "
                          "nothing. Make '# @package _global_' the experiment file's first "
                          "line.")
