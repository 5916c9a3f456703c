"""Result files as experiments: which rows belong to which experiment, and what it claims.

A row's experiment is read from the file's Parquet metadata (``jobs[i].choices.experiment``
of the job that produced it), so one multirun over several experiments works; a file without
that metadata falls back to its stem (``dtype_cliff.parquet`` → ``dtype_cliff``).

An experiment's claims and pivots are those its jobs ran with (each job's stored config), so
a sweep is judged by what it declared, even from a temporary config directory. Results written
before claims existed (``docs/data``) carry none: theirs are read from
``conf/experiment/<name>.yaml``. ``prefer="conf"`` reads the YAML first (re-judging old
results by edited claims).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import OmegaConf

from runner.analysis.values import is_missing
from runner.claims.spec import Claim, Pivot, parse

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


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
    stored: dict[str, Expectations] = field(default_factory=dict)

    def experiments(self) -> list[str]:
        if self.rows.empty or "experiment" not in self.rows:
            return []
        return list(dict.fromkeys(self.rows["experiment"]))

    def of(self, name: str) -> pd.DataFrame:
        return self.rows[self.rows["experiment"] == name]

    def expectations(self, name: str, conf_dir: Path = CONF_DIR,
                     prefer: str = "results") -> Expectations:
        """The claims of ``name``: stored with its results, else its YAML (or the other way
        round with ``prefer="conf"``); none when neither has any."""
        yaml = conf_dir / "experiment" / f"{name}.yaml"
        from_conf = (Expectations.from_node(OmegaConf.load(yaml), f"{yaml}: ")
                     if yaml.is_file() else None)
        order = ([self.stored.get(name), from_conf] if prefer == "results"
                 else [from_conf, self.stored.get(name)])
        return next((e for e in order if e is not None), Expectations())


def load_results(paths: Sequence[str | Path]) -> Results:
    """All rows of ``paths`` (files, sweep directories, results roots), by experiment."""
    from runner.storage.load import find_result_files, load, read_metadata

    frames, stored = [], {}
    for file in find_result_files([str(p) for p in paths]):
        df = load(file, samples="drop")
        meta = next(iter(read_metadata(file).values()), {})
        jobs = meta.get("jobs") if isinstance(meta.get("jobs"), list) else [meta]
        by_job = _experiments_by_job(jobs)
        fallback = _stem_experiment(file)
        job_nums = df["job_num"] if "job_num" in df else pd.Series([None] * len(df),
                                                                   index=df.index)
        df["experiment"] = [by_job.get(_as_int(j)) or fallback for j in job_nums]
        df["source_file"] = str(file)
        frames.append(df)
        for job in jobs:
            name = by_job.get(_as_int(job.get("job_num"))) or fallback
            expectations = _stored(job)
            if expectations is not None and name not in stored:
                stored[name] = expectations
    if not frames:
        return Results(pd.DataFrame())
    rows = pd.concat([_decategorise(f) for f in frames], ignore_index=True, sort=False)
    return Results(rows, stored)


def _stored(job: dict[str, Any]) -> Expectations | None:
    """The expectations in a job's stored config, or None when it predates them."""
    text = job.get("config") if isinstance(job, dict) else None
    if not isinstance(text, str):
        return None
    node = OmegaConf.create(text)
    if "expect" not in node and "pivots" not in node:
        return None
    return Expectations.from_node(node, f"job {job.get('job_num')}: ")


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
    parser.add_argument("--claims-from", choices=("results", "conf"), default="results",
                        help="judge by the claims stored with the results (default; results "
                             "without any use the YAML) or by the YAML's")
