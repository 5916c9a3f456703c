"""Checks of user input beyond the per-axis ones (``axes``, ``planner``, ``overrides``).

Each check rejects one kind of bad input before any trial runs, with a message that names
the key, the value and the valid choices or the fix (exit status 2, nothing left on disk).
The catalog, one line per kind with its test, is docs/errors.md.

* :func:`check_args` runs on the raw command line, before Hydra makes any folder (so a bad
  value in any job of a multirun stops the sweep before its first job);
* :func:`check_job` runs on a composed job and its planned trials, before the first trial
  (it also sees what experiments and ``cases`` set).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from runner.config.ops import CONF_DIR
from runner.core.errors import ConfigError, bad_value
from runner.storage.layout import RESUME_ENV, has_results

ISOLATION_CHOICES = ("process", "none")
#: numel and FLOP counts are int64 columns; a shape whose product passes this overflows them
MAX_NUMEL = 1 << 53
CUSTOM_BUILDER = "ops.custom.build"


# ---------------------------------------------------------------------------------------
# Top-level settings (command line and composed config)
# ---------------------------------------------------------------------------------------

def _bool(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise bad_value(key, value, ["true", "false"])


def _seconds(key: str, value: Any, allow_null: bool = False) -> None:
    if value is None and allow_null:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        null = " (0 or null: no limit)" if allow_null else ""
        raise ConfigError(f"invalid value for '{key}': {value!r}. Expected a number of seconds "
                          f">= 0{null}.")


def _isolation(key: str, value: Any) -> None:
    if value not in ISOLATION_CHOICES:
        raise bad_value(key, value, ISOLATION_CHOICES)


def _workers(key: str, value: Any) -> None:
    if value == "per_gpu" or (isinstance(value, int) and not isinstance(value, bool)
                              and value >= 1):
        return
    raise ConfigError(f"invalid value for '{key}': {value!r}. Expected an integer >= 1 or "
                      "per_gpu (one worker per visible GPU), e.g. workers=2 or workers=per_gpu.")


def _sweep_id(key: str, value: Any) -> None:
    text = str(value)
    if not text or "/" in text or text in (".", "..") or text.startswith("."):
        raise ConfigError(f"invalid value for '{key}': {value!r}. Expected a folder name (no "
                          "'/', not starting with '.'), e.g. sweep_id=baseline-1.")


SETTINGS = {
    "smoke": _bool, "check_accuracy": _bool, "store_calibration": _bool,
    "gpu_warmup_s": _seconds, "trial_timeout_s": lambda k, v: _seconds(k, v, allow_null=True),
    "isolation": _isolation, "sweep_id": _sweep_id, "workers": _workers,
}


def check_settings(values: Mapping[str, Any]) -> None:
    for key, check in SETTINGS.items():
        if key in values:
            check(key, values[key])


# ---------------------------------------------------------------------------------------
# Timer: negative values and contradictions
# ---------------------------------------------------------------------------------------

TIMER_MINIMUM = {"warmup_calls": 0, "warmup_s": 0, "min_samples": 1, "max_samples": 1,
                 "max_time_s": 0, "batch_below_us": 0, "batch_target_us": 0,
                 "max_calls_per_sample": 1}


def check_timer_values(timer: Mapping[str, Any], prefix: str = "timer.") -> None:
    for name, minimum in TIMER_MINIMUM.items():
        value = timer.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < minimum:
            raise ConfigError(f"invalid value for '{prefix}{name}': {value!r}. Expected a "
                              f"number >= {minimum}.")
    below, target = timer.get("batch_below_us"), timer.get("batch_target_us")
    if isinstance(below, (int, float)) and isinstance(target, (int, float)) and below > target:
        raise ConfigError(f"contradictory timer settings: '{prefix}batch_below_us' ({below}) > "
                          f"'{prefix}batch_target_us' ({target}): ops are batched only up to "
                          "a sample of batch_target_us. Raise batch_target_us or lower "
                          "batch_below_us.")
    if timer.get("flush_l2") is True and timer.get("clock") == "host":
        raise ConfigError(f"contradictory timer settings: '{prefix}flush_l2'=true with "
                          f"'{prefix}clock'=host: the host clock cannot exclude the flush from "
                          "a sample. Use clock=event with flush_l2.")


# ---------------------------------------------------------------------------------------
# Trials: sizes, threads, op parameters, user functions
# ---------------------------------------------------------------------------------------

def check_shape_size(shape: Iterable[int], key: str = "shape") -> None:
    total = 1
    for size in shape:
        if isinstance(size, int):
            total *= size
    if total > MAX_NUMEL:
        raise ConfigError(f"invalid value for '{key}': {list(shape)} has {total:.3g} elements, "
                          f"more than {MAX_NUMEL:.3g} (2**53): its element and FLOP counts do "
                          "not fit the result columns and no device holds it. Use smaller "
                          "sizes.")


def max_threads() -> int:
    """Oversubscribing the CPU is a fair experiment (conf/experiment/cpu_threads.yaml sweeps
    up to 16 threads on any machine); tens of thousands of threads abort the process in
    OpenMP's thread creation. The line: 8 threads per logical CPU, at least 64."""
    return max(64, 8 * (os.cpu_count() or 1))


def check_threads(value: Any) -> None:
    limit = max_threads()
    if isinstance(value, int) and not isinstance(value, bool) and value > limit:
        raise ConfigError(f"invalid value for 'num_threads': {value!r}. This machine has "
                          f"{os.cpu_count()} logical CPUs; expected 1..{limit} (8 per logical "
                          "CPU, at least 64) or null.")


def check_op_param_ranges(builder: Any, values: Mapping[str, Any], op: str) -> None:
    """A numeric op parameter whose default is >= 0 must not be negative (an int default >= 1:
    must be >= 1). ``custom``'s ``flops=-1`` (count automatically) has a negative default."""
    try:
        parameters = inspect.signature(builder).parameters
    except (TypeError, ValueError):
        return
    for name, value in values.items():
        default = parameters[name].default if name in parameters else inspect.Parameter.empty
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or isinstance(default, bool) or not isinstance(default, (int, float)):
            continue
        minimum = 1 if isinstance(default, int) and default >= 1 else min(default, 0)
        if value < minimum:
            raise ConfigError(f"invalid value for 'op.{name}': {value!r}. Op '{op}' expects a "
                              f"number >= {minimum:g} (default {default:g}).")


def check_custom_target(params: Mapping[str, Any]) -> None:
    from runner.config.targets import check_function

    n_inputs = params.get("n_inputs", 2)
    check_function(params.get("target", ""), "op.target",
                   n_inputs if isinstance(n_inputs, int) else 2)


def check_job(cfg: Any, planned: list, job_dir: Path, *, resuming: bool = False) -> None:
    """Job-level checks (after ``plan_job``), before the first trial."""
    values = OmegaConf.to_container(cfg, resolve=True)
    check_settings(values)
    check_timer_values(values.get("timer") or {})
    seen: set = set()
    for trial in planned:
        spec = trial.spec
        check_shape_size(spec.shape)
        check_threads(spec.num_threads)
        key = (trial.op.target, spec.params)
        if key in seen:
            continue
        seen.add(key)
        check_op_param_ranges(trial.op.builder, spec.params_dict, spec.op)
        if trial.op.target == CUSTOM_BUILDER:
            check_custom_target(spec.params_dict)
    if not resuming and has_results(job_dir):
        raise ConfigError(f"invalid value for 'sweep_id': {job_dir.parent.parent.name!r}: "
                          f"{job_dir} already holds results of another run. Choose another "
                          "sweep_id, or continue that sweep with: python -m runner.resume "
                          f"{job_dir.parent.parent}")


# ---------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------

def check_args(args: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Command-line checks, before Hydra composes anything or makes a folder."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from runner.config.trials import as_choices, shape_choices

    texts = [a for a in args if "=" in a and not a.startswith("-")]
    try:
        overrides = OverridesParser.create().parse_overrides(texts)
    except Exception:  # grammar errors: reported by runner.config.overrides.check_command_line
        return
    single: dict[str, Any] = {}
    timer: dict[str, Any] = {}
    search_dirs = [conf_dir]
    for ov in overrides:
        key = ov.key_or_group
        if ov.is_delete() or (ov.is_sweep_override() and not ov.is_discrete_sweep()):
            continue
        values = list(ov.sweep_iterator()) if ov.is_discrete_sweep() else [ov.value()]
        if key == "hydra.searchpath":
            search_dirs += [Path(str(v).removeprefix("file://")) for v in as_choices(values[0])]
        if ov.is_hydra_override():
            continue
        for value in values:
            if key in SETTINGS:
                SETTINGS[key](key, value)
            elif key.startswith("timer."):
                timer[key.partition(".")[2]] = value
            elif key == "shape" and isinstance(value, list):
                for shape in shape_choices(value):
                    check_shape_size(shape)
            elif key == "num_threads":
                for item in as_choices(value):
                    check_threads(item)
        if len(values) == 1:
            single[key] = values[0]
        if key == "experiment":
            for name in values:
                _check_experiment_file(str(name), search_dirs)
    check_timer_values(timer)
    _check_results_dir(str(single.get("results_dir", "results")))
    _check_sweep_id(single)
    _check_op_args(overrides)


def _check_op_args(overrides: list[Any]) -> None:
    """``op.target`` of ``op=custom`` on the command line (every value of a multirun)."""
    chosen = [ov for ov in overrides if ov.key_or_group == "op"]
    if not chosen or any(str(v) != "custom" for v in _values(chosen[-1])):
        return
    n_inputs = next((v for ov in overrides if ov.key_or_group == "op.n_inputs"
                     for v in _values(ov)), 2)
    for ov in overrides:
        if ov.key_or_group == "op.target":
            for value in _values(ov):
                from runner.config.trials import as_choices

                for item in as_choices(value):
                    check_custom_target({"target": item, "n_inputs": n_inputs})


def _values(ov: Any) -> list[Any]:
    if ov.is_discrete_sweep():
        return list(ov.sweep_iterator())
    return [] if ov.is_sweep_override() else [ov.value()]


def _check_experiment_file(name: str, search_dirs: list[Path]) -> None:
    """A user's experiment YAML that does not parse: name the file and the YAML error (Hydra
    would exit 1 with a traceback-like message)."""
    for folder in search_dirs:
        path = folder / "experiment" / f"{name}.yaml"
        if not path.is_file():
            continue
        try:
            node = OmegaConf.load(path)
        except Exception as exc:  # yaml.YAMLError and OmegaConf's own errors
            detail = " ".join(str(exc).split())
            raise ConfigError(f"invalid value for 'experiment': {name!r}: {path} is not valid "
                              f"YAML ({detail}). Fix the file.") from None
        if not isinstance(node, Mapping) and not hasattr(node, "keys"):
            raise ConfigError(f"invalid value for 'experiment': {name!r}: {path} must be a "
                              "mapping of config keys.")
        return


def _check_results_dir(results_dir: str) -> None:
    """The nearest existing folder of ``results_dir`` must be a writable directory."""
    path = Path(results_dir).expanduser().absolute()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"invalid value for 'results_dir': {results_dir!r}: {probe} is not a "
                          "directory. Point results_dir at a folder (it is made if missing).")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"invalid value for 'results_dir': {results_dir!r}: {probe} is not "
                          "writable. Choose a folder you can write to.")


def _check_sweep_id(single: dict[str, Any]) -> None:
    """A fixed ``sweep_id`` whose folder exists would mix two runs' files and overwrite the
    first run's Hydra record: refuse before Hydra writes anything."""
    if "sweep_id" not in single or os.environ.get(RESUME_ENV) == "1":
        return
    sweep_id = str(single["sweep_id"])
    folder = Path(str(single.get("results_dir", "results"))) / sweep_id
    if folder.exists():
        raise ConfigError(f"invalid value for 'sweep_id': {sweep_id!r}: {folder} already exists "
                          "and results are never overwritten. Choose another sweep_id (or "
                          "leave it unset for a timestamp), or continue that sweep with: "
                          f"python -m runner.resume {folder}")
