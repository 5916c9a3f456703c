"""Checks of user input beyond one setting's own rule (``settings``, ``axes``, ``ops``).

Each check rejects one kind of bad input before any trial runs, with a message that names
the key, the value and the valid choices or the fix (exit status 2, nothing left on disk).
The catalog, one line per kind with its test, is docs/errors.md.

* sizes, threads and user functions of planned trials (:func:`check_job`);
* files and folders the command line names: an experiment's YAML, ``results_dir``, a fixed
  ``sweep_id`` (called by ``runner.config.overrides``, before Hydra makes any folder).
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from runner.core.errors import ConfigError, shown, unwritable
from runner.storage.layout import RESUME_ENV, has_results

#: numel and FLOP counts are int64 columns; a shape whose product passes this overflows them
MAX_NUMEL = 1 << 53
CUSTOM_BUILDER = "ops.custom.build"
#: what Linux file systems accept: a name, and a whole path
MAX_NAME_BYTES, MAX_PATH_BYTES = 255, 4096


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


def check_custom_target(params: Mapping[str, Any]) -> None:
    from runner.config.targets import check_function

    n_inputs = params.get("n_inputs", 2)
    check_function(params.get("target", ""), "op.target",
                   n_inputs if isinstance(n_inputs, int) else 2)


def check_job(cfg: Any, planned: list, job_dir: Path | None, *, resuming: bool = False) -> None:
    """Job-level checks (after ``plan_job``, which checks every setting), before the first
    trial; ``job_dir`` None: before Hydra made it (``runner.config.preflight``)."""
    seen: set = set()
    for trial in planned:
        spec = trial.spec
        check_shape_size(spec.shape)
        check_threads(spec.num_threads)
        key = (trial.op.target, spec.params)
        if key in seen:
            continue
        seen.add(key)
        if trial.op.target == CUSTOM_BUILDER:
            check_custom_target(spec.params_dict)
    if job_dir is not None and not resuming and has_results(job_dir):
        raise ConfigError(f"invalid value for 'sweep_id': {job_dir.parent.parent.name!r}: "
                          f"{job_dir} already holds results of another run. Choose another "
                          "sweep_id, or continue that sweep with: python -m runner.resume "
                          f"{job_dir.parent.parent}")


# ---------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------

def check_experiment_file(name: str, search_dirs: list[Path]) -> None:
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


def check_output_subdir(values: list[Any]) -> None:
    """``hydra.output_subdir`` stays ``.hydra``: each job's composed config there is what
    ``runner.resume`` and every row's provenance read (null: the sweep runs, and then
    cannot be resumed or traced). A resume names ``.hydra-resume-<utc>``: allowed."""
    for value in values:
        if not str(value or "").startswith(".hydra"):
            raise ConfigError(
                f"invalid value for 'hydra.output_subdir': {value!r} (on the command line): "
                "opsweep keeps each job's config in .hydra, which python -m runner.resume and "
                "the provenance of every row read. Leave hydra.output_subdir out.")


def check_results_dir(results_dir: str) -> None:
    """The nearest existing folder of ``results_dir`` must be a writable directory. A
    leading ``~`` is refused: quoted, the shell leaves it alone, and Hydra would make a
    folder named ``~`` in the current one."""
    if results_dir.startswith("~"):
        raise ConfigError(
            f"invalid value for 'results_dir': {results_dir!r}: a '~' that reaches opsweep "
            f"(quoted, or from a file) is not expanded, and a folder named '~' would be made "
            f"here. Write the path out: results_dir={os.path.expanduser(results_dir)}")
    if "\0" in results_dir:
        raise ConfigError(f"invalid value for 'results_dir': {results_dir!r} holds a NUL byte "
                          "(\\0), which no path can hold. Remove it.")
    path = Path(results_dir).absolute()
    probe = _nearest_existing(results_dir, path)
    if not probe.is_dir():
        raise ConfigError(f"invalid value for 'results_dir': {results_dir!r}: {probe} is not a "
                          "directory. Point results_dir at a folder (it is made if missing).")
    try:  # os.access says yes to root anywhere, /proc included: make a folder and remove it
        os.rmdir(tempfile.mkdtemp(prefix=".opsweep-probe-", dir=probe))
    except OSError as exc:
        raise ConfigError(f"invalid value for 'results_dir': {results_dir!r}: no folder can be "
                          f"made in {probe} ({exc.strerror}). Choose a folder you can write to.") \
            from None
    too_long = [part for part in path.parts if len(part.encode()) > MAX_NAME_BYTES]
    if too_long or len(str(path).encode()) > MAX_PATH_BYTES // 2:
        raise ConfigError(f"invalid value for 'results_dir': {results_dir!r} is too long for a "
                          f"path (a name has at most {MAX_NAME_BYTES} bytes, a path "
                          f"{MAX_PATH_BYTES}, and sweeps add folders below it). Choose a "
                          "shorter path.")


def _nearest_existing(results_dir: str, path: Path) -> Path:
    """The nearest folder of ``path`` that exists (what a missing one is made in). A loop of
    symbolic links on the way is refused: ``Path.exists`` calls it missing, and Hydra's
    ``mkdir`` then failed on it with a traceback."""
    for probe in [*reversed(path.parents), path]:
        try:
            os.stat(probe)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ConfigError(
                    f"invalid value for 'results_dir': {results_dir!r}: {probe} is a loop of "
                    f"symbolic links ({exc.strerror}). Point results_dir at a real folder, or "
                    f"fix the link (ls -l {probe}).") from None
            return probe.parent  # missing (or not a folder): made from its parent
    return path


def check_sweep_folder(single: dict[str, Any]) -> None:
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


def guard_hydra_record() -> None:
    """Hydra writes each job's record (``.hydra/config.yaml``, a resume's ``.hydra-resume-*``)
    before opsweep's code runs; on a full disk its ``OSError`` came out as a traceback, and a
    value no file can hold (a lone surrogate) as a ``UnicodeEncodeError``. Now it is one line
    naming what failed and the fix, and a fresh start's folder, which holds only the lock and
    a half-written record (neither a rerun nor ``runner.resume`` took it), is removed: the
    same command then runs. A sweep with results is kept and resumed."""
    import hydra.core.utils as hydra_utils

    save = hydra_utils._save_config
    if getattr(save, "opsweep_guarded", False):
        return
    # Hydra's own writer, as it writes: the same YAML from libyaml's emitter (config_yaml)
    write = _save_yaml if getattr(save, "__module__", "") == "hydra.core.utils" else save

    def guarded(cfg: Any, filename: str, output_dir: Path) -> None:
        try:
            write(cfg, filename, output_dir)
        except (OSError, ValueError) as exc:
            sweep = Path(output_dir).parent
            sweep = sweep.parent.parent if sweep.parent.name == "jobs" else sweep
            what = (f"{exc.strerror or exc}. Free space or fix permissions" if
                    isinstance(exc, OSError) else f"{_unwritable(cfg) or exc}. Fix the value")
            again = (f"then python -m runner.resume {sweep}" if not _removed(sweep) else
                     f"then run the same command again ({sweep} is removed: nothing ran)")
            print(f"opsweep: error: could not write Hydra's record of the job to "
                  f"{Path(output_dir) / filename}: {what}, {again}", file=sys.stderr)
            raise SystemExit(1 if isinstance(exc, OSError) else 2) from None

    guarded.opsweep_guarded = True  # type: ignore[attr-defined]
    hydra_utils._save_config = guarded


def _removed(sweep: Path) -> bool:
    """Empty and remove ``sweep`` where this start made it (with the folders above it that
    it made) and no job holds results yet; whether it did."""
    import shutil

    from runner.storage import lock

    jobs = sweep / "jobs"
    if not lock.made_here(sweep) or (
            jobs.is_dir() and any(has_results(job) for job in jobs.iterdir())):
        return False
    for path in sweep.iterdir():
        if path.is_dir():
            shutil.rmtree(path)
        elif path.name != lock.LOCK_FILE:
            path.unlink()
    lock.release(sweep)  # the lock file, then each folder it made
    return not sweep.exists()


def _unwritable(cfg: Any) -> str | None:
    """The first setting of ``cfg`` whose text no file can hold, with its value."""
    container = OmegaConf.to_container(cfg) if OmegaConf.is_config(cfg) else cfg
    stack: list[tuple[str, Any]] = [("", container)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack += [(f"{key}.{k}".lstrip("."), v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{key}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, str) and (problem := unwritable(value)):
            return f"invalid value for {key!r}: {shown(value)} {problem}"
    return None


def _save_yaml(cfg: Any, filename: str, output_dir: Path) -> None:
    """``hydra.core.utils._save_config``, with :func:`config_yaml` for its YAML."""
    output_dir.mkdir(parents=True, exist_ok=True)
    with open(output_dir / filename, "w", encoding="utf-8") as file:
        file.write(config_yaml(OmegaConf.to_container(cfg, enum_to_str=True)))


def config_yaml(container: Any) -> str:
    """What ``OmegaConf.to_yaml`` writes for a config's ``container``, by libyaml's C
    emitter where PyYAML has it: OmegaConf's pure-Python emitter took ~30 ms per job for
    ``.hydra/hydra.yaml`` (its help text), a third of a small job's start. The same
    representer (a string that reads as a number or a boolean is quoted), so the file reads
    back to the same config; long strings may be folded at other places."""
    import yaml

    return yaml.dump(container, Dumper=_dumper(), default_flow_style=False, allow_unicode=True,
                     sort_keys=False)


@functools.cache
def _dumper() -> Any:
    import yaml
    from omegaconf._utils import OmegaConfDumper, get_omega_conf_dumper

    if getattr(yaml, "CDumper", None) is None:  # PyYAML built without libyaml
        return get_omega_conf_dumper()

    class CDumper(yaml.CDumper):  # type: ignore[misc,name-defined]
        pass

    CDumper.add_representer(str, OmegaConfDumper.str_representer)
    return CDumper
