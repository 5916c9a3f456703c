"""Result files as experiments: which rows belong to which experiment, and what it claims.

A row's experiment, and whether its job ran with ``smoke=true``, are read from the file's
Parquet metadata (``jobs[i].choices.experiment`` and ``jobs[i].config`` of the job that
produced it), so one multirun over several experiments works; a file without
that metadata falls back to its stem (``dtype_cliff.parquet`` → ``dtype_cliff``).

An experiment's claims and pivots come from its YAML, ``<conf_dir>/experiment/<name>.yaml``
(the project's ``conf/`` or ``--conf-dir``): configs name code that runs (a claim's
``_target_``), a results file never does. ``prefer="results"`` judges by the claims stored
with the results (what the sweep declared, even from a temporary config directory) when they
are plain data; a stored claim that names code is never imported from a file: the YAML's
claims are used instead, or it is an error naming it. Only ``check=true`` inside the run that
wrote the file trusts its own stored claims (``trust=True``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import OmegaConf

from runner.analysis.values import is_missing
from runner.claims.spec import Claim, ClaimSpecError, Pivot, parse
from runner.core.install import CONF_DIR

#: The column :func:`load_results` adds: the row's job ran with ``smoke=true`` (its numbers
#: only show that the configs run).
SMOKE_COLUMN = "smoke"


@dataclass
class Expectations:
    """What one experiment claims, and the tables it asks for."""

    claims: list[Claim] = field(default_factory=list)
    pivots: list[Pivot] = field(default_factory=list)

    @classmethod
    def from_node(cls, node: Any, where: str = "") -> Expectations:
        """From a config mapping with ``expect`` and ``pivots`` keys (either may be absent)."""
        get = node.get if hasattr(node, "get") else (lambda key: None)
        return cls(parse(get("expect"), Claim, f"{where}expect"),
                   parse(get("pivots"), Pivot, f"{where}pivots"))


@dataclass
class Results:
    """Rows with an ``experiment`` column, and each experiment's stored expectations."""

    rows: pd.DataFrame
    #: experiment → (its stored config node, where it came from), parsed only when asked; or
    #: Expectations built in code
    stored: dict[str, Any] = field(default_factory=dict)

    def experiments(self) -> list[str]:
        if self.rows.empty or "experiment" not in self.rows:
            return []
        return list(dict.fromkeys(self.rows["experiment"]))

    def of(self, name: str) -> pd.DataFrame:
        return self.rows[self.rows["experiment"] == name]

    def expectations(self, name: str, conf_dir: Path = CONF_DIR, prefer: str = "conf",
                     trust: bool = False) -> Expectations:
        """The claims of ``name``: its YAML (or, with ``prefer="results"``, those stored with
        its results first); none when neither has any. Stored claims that name code
        (``_target_``) are used only with ``trust`` (the run that wrote them)."""
        yaml = experiment_yaml(conf_dir, name)
        from_conf = (Expectations.from_node(OmegaConf.load(yaml), f"{yaml}: ")
                     if yaml is not None else None)
        from_results = self._stored(name, trust=trust or from_conf is not None)
        order = [from_results, from_conf] if prefer == "results" else [from_conf, from_results]
        return next((e for e in order if e is not None), Expectations())

    def _stored(self, name: str, trust: bool) -> Expectations | None:
        if name not in self.stored:
            return None
        if isinstance(self.stored[name], Expectations):
            return self.stored[name]
        node, where = self.stored[name]
        targets = [c.get("_target_") for c in (node.get("expect") or [])
                   if hasattr(c, "get") and c.get("_target_") is not None]
        if targets and not trust:
            raise ClaimSpecError(
                f"{where}: the results of {name!r} state a claim computed by code "
                f"(_target_: {targets[0]}); a results file never names code that runs. Judge "
                f"them with the experiment's YAML: --conf-dir DIR holding "
                f"experiment/{name}.yaml")
        if targets:
            return None  # the YAML's claims judge (trusted configs, not the file's copy)
        return Expectations.from_node(node, where)


def experiment_yaml(conf_dir: Path, name: str) -> Path | None:
    """``<conf_dir>/experiment/<name>.yaml`` if it exists; a name read from a results file
    never leads outside ``conf_dir/experiment``."""
    folder = (Path(conf_dir) / "experiment").resolve()
    path = (folder / f"{name}.yaml").resolve()
    return path if path.parent == folder and path.is_file() else None


def load_results(paths: Sequence[str | Path]) -> Results:
    """All rows of ``paths`` (files, sweep directories, results roots), by experiment."""
    from runner.storage.load import load, read_metadata
    from runner.storage.result_files import find_result_files

    frames, stored = [], {}
    for file in find_result_files([str(p) for p in paths]):
        df = load(file, samples="drop")
        meta = next(iter(read_metadata(file).values()), {})
        jobs = meta.get("jobs") if isinstance(meta.get("jobs"), list) else [meta]
        by_job = _experiments_by_job(jobs)
        smoke_jobs = {_as_int(job.get("job_num")) for job in jobs if _smoke(job)}
        fallback = _stem_experiment(file)
        job_nums = df["job_num"] if "job_num" in df else pd.Series([None] * len(df),
                                                                   index=df.index)
        # two columns added at once: one insert at a time into a wide frame fragments it
        # (pandas' PerformanceWarning)
        added = pd.DataFrame({"experiment": [by_job.get(_as_int(j)) or fallback
                                             for j in job_nums],
                              "source_file": str(file),
                              SMOKE_COLUMN: [_as_int(j) in smoke_jobs or (
                                  len(jobs) == 1 and bool(smoke_jobs)) for j in job_nums]},
                             index=df.index)
        frames.append(pd.concat([df.drop(columns=["experiment", "source_file", SMOKE_COLUMN],
                                         errors="ignore"), added], axis=1))
        for job in jobs:
            name = by_job.get(_as_int(job.get("job_num"))) or fallback
            node = _stored(job)
            if node is not None and name not in stored:
                stored[name] = (node, f"{file}: job {job.get('job_num')}")
    if not frames:
        return Results(pd.DataFrame())
    rows = pd.concat([_decategorise(f) for f in frames], ignore_index=True, sort=False)
    return Results(rows, stored)


def _config(job: dict[str, Any]) -> Any:
    """A job's stored config as a node, or None (no config, malformed text, not a mapping)."""
    text = job.get("config") if isinstance(job, dict) else None
    if not isinstance(text, str):
        return None
    try:
        node = OmegaConf.create(text)
    except Exception:  # noqa: BLE001 (any malformed text: the file states no config)
        return None
    return node if hasattr(node, "get") else None


def _smoke(job: dict[str, Any]) -> bool:
    """Whether a job ran with ``smoke=true`` (its stored config says so)."""
    node = _config(job)
    return node is not None and node.get("smoke") is True


def _stored(job: dict[str, Any]) -> Any:
    """The ``expect``/``pivots`` node of a job's stored config (data, not parsed yet), or None
    when it predates them or is not a mapping."""
    node = _config(job)
    if node is None or ("expect" not in node and "pivots" not in node):
        return None
    return OmegaConf.create({"expect": node.get("expect"), "pivots": node.get("pivots")})


def _experiments_by_job(jobs: list[Any]) -> dict[int | None, str]:
    """job_num → experiment name, from a merged file's metadata (``jobs`` list) or a job
    file's own (``choices`` at the top level)."""
    out: dict[int | None, str] = {}
    for job in jobs:
        if not isinstance(job, dict):
            continue
        name = (job.get("choices") or {}).get("experiment")
        if name:
            out[_as_int(job.get("job_num"))] = str(name)
    if len(out) == 1:  # a single job: every row is its, whatever its job_num says
        out[None] = next(iter(out.values()))
    return out


def _stem_experiment(file: Path) -> str:
    if file.stem in ("results", "trials"):  # results/<sweep>/results.parquet: no name in it
        return f"(unnamed: {file})"
    return file.stem


def _as_int(value: Any) -> int | None:
    try:
        return None if is_missing(value) else int(value)
    except (TypeError, ValueError):
        return None


def _decategorise(df: pd.DataFrame) -> pd.DataFrame:
    """Categoricals to plain objects, so frames with different categories concatenate and
    compare as strings."""
    out = df.copy()
    for col in out.columns:
        if isinstance(out[col].dtype, pd.CategoricalDtype):
            out[col] = out[col].astype(object)
    return out


def add_results_arguments(parser: Any) -> None:
    """The arguments ``runner.check`` and ``runner.claims.report`` share: which results, and
    which claims judge them."""
    parser.add_argument("results", nargs="+", help="merged result files, sweep directories "
                        "or a results root")
    parser.add_argument("--conf-dir", default=str(CONF_DIR),
                        help="config directory holding experiment/<name>.yaml")
    parser.add_argument("--claims-from", choices=("conf", "results"), default="conf",
                        help="judge by the experiment's YAML under --conf-dir (default) or by "
                             "the claims stored with the results (plain data only: a results "
                             "file never names code that runs)")
