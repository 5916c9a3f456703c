"""Compose and plan every job of a sweep before the first one runs.

Hydra composes a multirun's jobs one by one, after it has written ``multirun.yaml``, and a job
whose experiment file, op or override does not compose stops the sweep with Hydra's own message
and exit status 1, after the jobs before it ran. Here every job is composed with Hydra's own
composition (the same config search path, ``--config-dir`` included) and planned, first:
Hydra's merge and struct errors become opsweep's message naming the key, the value and the fix
(:class:`ConfigError`, exit status 2), and nothing is on disk yet.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from runner.config import sweep_size
from runner.config.commandline import CommandLine
from runner.config.ops import CONF_DIR
from runner.config.schema import RunConfig
from runner.core.errors import ConfigError

#: With more jobs than this, the sweep's estimated size is said after the first job is
#: checked (composing them all takes ~0.1 s each), and the exact one after all of them.
SAY_EARLY_JOBS = 20

#: Launchers that run jobs on this machine: only there can the driver plan devices.
LOCAL_LAUNCHERS = ("hydra._internal.core_plugins.basic_launcher.BasicLauncher",)


def preflight(cmd: CommandLine, conf_dir: Path = CONF_DIR) -> None:
    """Compose and plan each job of ``cmd``; :class:`ConfigError` for the first bad one.

    Says the sweep's size on stderr before it starts (``runner.config.sweep_size``): the jobs
    are counted before they are listed, and a sweep past ``max_trials`` stops here, exit 2."""
    from hydra.core.global_hydra import GlobalHydra

    check_job_count(cmd)
    jobs = cmd.job_overrides()
    hydra = _hydra(cmd, conf_dir)
    counts: list[int] = []
    timer: Any = None
    empty: list[str] = []  # the shards with no trial (an array job's spare task)
    try:
        for number, job in enumerate(jobs):
            where = f"job {number} ({' '.join(job)}): " if len(jobs) > 1 else ""
            try:
                count, limit, timer, no_trials = _check_job(hydra, cmd, job, conf_dir)
                empty += no_trials
                if count is None:
                    continue
                counts.append(count)
                if number == 0 and len(jobs) > 1:  # refused now, not after every compose
                    sweep_size.check_trials(count * len(jobs), limit, timer, jobs=len(jobs),
                                            estimated=True)
                if number == 0 and len(jobs) > SAY_EARLY_JOBS:  # checking them all takes a while
                    _say(sweep_size.size_line([count] * len(jobs), timer, estimated=True))
            except ConfigError as exc:
                raise ConfigError(f"{where}{exc}") from None
            except Exception as exc:  # Hydra's and OmegaConf's errors, in opsweep's words
                raise ConfigError(f"{where}{explain(exc)}") from None
        if counts:
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


def check_job_count(cmd: CommandLine) -> None:
    """Every job has a trial at least: more jobs than ``max_trials`` is refused before the
    jobs are listed or their values checked (``-m seed=range(0,1000000)``: milliseconds)."""
    n_jobs = sweep_size.job_count(cmd)
    limit = sweep_size.max_trials_given(cmd) or RunConfig.max_trials
    if n_jobs > limit:
        sweep_size.check_trials(n_jobs, limit, None, jobs=n_jobs, estimated=True)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _hydra(cmd: CommandLine, conf_dir: Path) -> Any:
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.global_hydra import GlobalHydra

    from runner.config import schema

    schema.register()  # base_config, as python -m runner registers it
    search_path = create_config_search_path(f"file://{conf_dir.resolve()}")
    if cmd.flags.config_dir:  # as hydra.main adds it
        search_path.prepend(provider="command-line",
                            path=f"file://{Path(cmd.flags.config_dir).resolve()}",
                            anchor=SearchPathQuery(provider="schema"))
    GlobalHydra.instance().clear()
    return Hydra.create_main_hydra2(task_name="runner", config_search_path=search_path)


def _check_job(hydra: Any, cmd: CommandLine, job: list[str], conf_dir: Path,
               expand: bool = True) -> tuple[int | None, Any, Any, list[str]]:
    """Compose and plan one job: (its trial count or None where its launcher runs it on
    another machine, its ``max_trials``, its timer settings, ``["shard i of n"]`` when its
    shard has no trial).
    ``expand``: an experiment's ``hydra.sweeper.params`` jobs are composed and planned too."""
    from hydra.types import RunMode

    from runner.config.guards import check_job, check_results_dir
    from runner.config.planner import plan_job, remember

    cfg = hydra.compose_config(cmd.flags.config_name or "config", job,
                               run_mode=RunMode.MULTIRUN if cmd.multirun else RunMode.RUN,
                               with_log_configuration=False)
    launcher = OmegaConf.select(cfg, "hydra.launcher._target_")
    check_ray_request(launcher, OmegaConf.select(cfg, "hydra.launcher.ray"))
    devices_here = _runs_here(launcher, OmegaConf.select(cfg, "hydra.launcher.ray.init.address"))
    params = OmegaConf.select(cfg, "hydra.sweeper.params") if cmd.multirun and expand else None
    if params:  # an experiment's sweep: its jobs are composed and planned here too
        _check_sweeper_jobs(hydra, cmd, job, conf_dir, params,
                            OmegaConf.select(cfg, "hydra.runtime.choices.experiment"))
    with open_dict(cfg):
        del cfg["hydra"]
    _check_experiment_package(cfg)
    check_results_dir(str(cfg.results_dir))
    limit, timer = cfg.get("max_trials"), OmegaConf.to_container(cfg.timer, resolve=True)
    planned = plan_job(cfg, conf_dir, devices_here=devices_here)
    check_job(cfg, planned, None)
    if launcher not in (None, *LOCAL_LAUNCHERS):  # the job plans again in its own process
        return None, limit, timer, []
    remember(job, planned)
    sharded = cfg.get("num_shards", 1) > 1 and not planned
    return len(planned), limit, timer, [f"shard {cfg.shard} of {cfg.num_shards}"] if sharded else []


def _runs_here(launcher: Any, ray_address: Any) -> bool:
    """Whether the launcher runs the job on this machine (basic, submitit_local, a local Ray
    cluster), whose GPUs its devices resolve against; SLURM and a Ray cluster joined by
    address resolve them on their own nodes."""
    name = str(launcher or "").rpartition(".")[2]
    return name in ("", "BasicLauncher", "LocalLauncher") or (name == "RayLauncher"
                                                              and not ray_address)


def _check_sweeper_jobs(hydra: Any, cmd: CommandLine, job: list[str], conf_dir: Path,
                        params: Any, experiment: str | None) -> None:
    """``hydra.sweeper.params`` of an experiment (``dtype: fp32,fp8``): Hydra's sweeper makes
    them jobs after these checks, so a bad value ran the jobs before it and left the sweep
    folder behind. Each of its jobs is composed and planned here, named by its file."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    given = {text.partition("=")[0] for text in job}  # the command line wins, as in Hydra
    texts = [f"{key}={value}" for key, value in params.items() if str(key) not in given]
    where = f"in experiment/{experiment}.yaml" if experiment else "in the config"
    try:
        parsed = OverridesParser.create().parse_overrides(texts)
        for extra in BasicSweeper.split_arguments(parsed, None)[0]:
            _check_job(hydra, cmd, [*job, *extra], conf_dir, expand=False)
    except ConfigError as exc:
        raise ConfigError(f"{where} (hydra.sweeper.params): {exc} Fix the value in that "
                          "file, or override it on the command line.") from None
    except Exception as exc:  # the grammar's and Hydra's own errors
        raise ConfigError(f"{where} (hydra.sweeper.params): {explain(exc)}") from None


def check_ray_request(launcher: Any, ray_cfg: Any) -> None:
    """A Ray task that asks a local cluster for more CPUs or GPUs than it has is never
    scheduled: Ray logs "No available node types can fulfill resource request" every 35 s
    and ``ray.get`` waits forever, swallowing Ctrl-C. Refused before anything starts. A
    cluster joined by address decides for itself (it may add nodes); a GPU count only torch
    could tell is left to Ray."""
    if not str(launcher or "").endswith("RayLauncher") or ray_cfg is None:
        return
    init, remote = ray_cfg.get("init") or {}, ray_cfg.get("remote") or {}
    if init.get("address"):
        return
    from runner.core.gpus import visible_gpus

    gpus = visible_gpus()
    # the CPUs this process may run on (a container's pinned set), as Ray counts them; a
    # cgroup CPU quota below it is not seen here, and Ray's own wait then applies
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    has = {"num_cpus": init.get("num_cpus") or cpus,
           "num_gpus": init.get("num_gpus") if init.get("num_gpus") is not None
           else None if gpus is None else len(gpus)}
    for key, what in (("num_cpus", "CPU"), ("num_gpus", "GPU")):
        try:
            wanted = float(remote.get(key) or 0)
        except (TypeError, ValueError):
            continue  # Ray's own check names a value that is not a number
        if has[key] is not None and wanted > float(has[key]):
            fix = f"Ask for at most {has[key]}" if has[key] else "Use device=cpu with num_gpus=0"
            raise ConfigError(
                f"invalid value for 'hydra.launcher.ray.remote.{key}': {remote.get(key)}. "
                f"Each Ray task asks for {wanted:g} {what}{'' if wanted == 1 else 's'}, but "
                f"the local Ray cluster has {has[key]}, so no task could ever start. {fix}, or set "
                "hydra.launcher.ray.init.address=HOST:PORT to use a cluster that has them.")


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


def explain(exc: BaseException) -> str:
    """One line naming what Hydra or OmegaConf refused: the key, the value and the fix."""
    from hydra.errors import MissingConfigException
    from omegaconf.errors import (
        ConfigKeyError,
        InterpolationResolutionError,
        OmegaConfBaseException,
    )

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    first = " ".join(str(exc).split())
    source = re.match(r"In '([^']+)'", first)
    where = f" (in {source.group(1)}.yaml)" if source and source.group(1) != "config" else ""
    for error in chain:
        if isinstance(error, MissingConfigException) and error.missing_cfg_file:
            group, _, name = str(error.missing_cfg_file).rpartition("/")
            options = ", ".join(error.options or [])
            return (f"invalid value for '{group or 'config'}': {name!r}{where}: no such "
                    f"config. Valid choices: {options}. Fix the name in the override or in "
                    "the experiment's defaults list.")
        if not isinstance(error, OmegaConfBaseException):
            continue
        key = getattr(error, "full_key", None) or getattr(error, "key", None)
        detail = " ".join(str(getattr(error, "msg", "") or "").split())
        detail = detail.partition(" full_key:")[0].rstrip(".")
        if key and isinstance(error, ConfigKeyError):
            return (f"unknown config key '{key}'{where}: {detail}. Remove it or fix its name "
                    "(python -m runner --help lists the keys).")
        if key and isinstance(error, InterpolationResolutionError):
            # its value is the interpolation that failed, never None
            return (f"invalid value for '{key}'{where}: its interpolation does not resolve: "
                    f"{detail}. Set what it reads (export the variable) or give a default, "
                    "e.g. ${oc.env:NAME,fallback}.")
        if key:
            return (f"invalid value for '{key}'{where}: {getattr(error, 'value', None)!r}: "
                    f"{detail}. Give it a value of the declared type (python -m runner --help "
                    "lists the keys and their types).")
    return (f"the config does not compose: {first}. Fix the file or override it names "
            "(python -m runner --help lists the groups and keys).")
