"""Each trial's time across sweeps and commits: ``python -m runner.history RESULTS...``.

Why: ``runner.compare`` answers "is NEW slower than BASE"; a project that sweeps on every
commit asks "when did this trial get slower, and at which commit?". This reads any number of
sweeps, follows every trial (by ``trial_id``, the hash of its spec, equal on every machine)
through them in the order they ran, and judges each step from one sweep to the next with the
statistics ``runner.compare`` uses (:func:`runner.analysis.significance.compare_samples`:
bootstrap CI of the ratio of medians, Mann-Whitney U, and a change called only when it is
significant and larger than both the threshold and the runs' own noise). A noisy pair (a
run under a burst of load) is never a step: its point says why in ``noisy``.

The time followed is the device time (``gpu_time_*``) where every point of the trial has
one, else the loop time (CPU trials, or results from before the device time). Sweeps are
ordered by their first trial's timestamp; each point carries opsweep's commit
(``git_commit``, ``+`` when the tree was dirty) and the user code's commit when it lives in
another repository (``user_git_commit``); an install without git records none, and a sweep is
then named by its start time alone.

Trials that never ran in a sweep together are not one history: a sweep over ``num_threads``
of another experiment shares no sweep with the nightly trials. So trials are grouped
(``group``): two trials are in one group when some sweep ran both, and each group gets its
own table and plots, over its own sweeps.

One sweep is accepted: it is the first point of a history (the first commit of a project),
with no step to judge yet, and says so.

Writes into ``--out`` (default ``<first source>/history``): ``history.csv`` (one row per
trial and sweep) and ``history_<op>.png`` per op and group (``history_<op>_<group>.png``
where an op has several groups: time against sweep, one line per trial, steps marked).
Exit status: 1 when a step got slower (``--fail-on slower``, the default; ``any`` counts
faster steps too, ``never`` only reports), 2 for bad arguments, else 0.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.analysis.figure import with_modes
from runner.analysis.history_plot import plot_history
from runner.analysis.history_table import render, where
from runner.analysis.selection import display_columns, label_columns, spec_label
from runner.analysis.significance import PairSide, StatsSettings, compare_samples, flag_or_reason
from runner.cli import OneLineArgumentParser, fail, program
from runner.storage.load import load

#: The two times a point can follow: (median, raw samples, CI low, CI high) columns.
TIMES = {"device": ("gpu_time_median_us", "gpu_time_samples_us", "gpu_time_ci_low_us",
                    "gpu_time_ci_high_us"),
         "loop": ("time_median_us", "samples_us", "time_ci_low_us", "time_ci_high_us")}
#: Each time's noisy flag and reason (a noisy step is never a step: ``significance``).
NOISY = {"device": ("gpu_time_noisy", "gpu_time_noisy_reason"),
         "loop": ("noisy", "noisy_reason")}


@dataclass
class History:
    """Every trial's points (``points``: one row per trial and sweep, in sweep order, with
    the step from the point before) and one summary row per trial (``trials``)."""

    points: pd.DataFrame
    trials: pd.DataFrame

    def steps(self, verdicts: Sequence[str] = ("slower",)) -> pd.DataFrame:
        """The points whose step from the sweep before is one of ``verdicts``."""
        return self.points[self.points["step"].isin(list(verdicts))]


def sweep_order(df: pd.DataFrame) -> pd.DataFrame:
    """One row per sweep, in the order the sweeps ran: ``sweep_id``, ``started``, ``commit``
    (opsweep's, short, ``+`` when dirty, and the user code's after a ``/`` when recorded;
    empty without git)."""
    rows = []
    for sweep, group in df.groupby(df["sweep_id"].astype(str), sort=False):
        started = pd.to_datetime(group["timestamp"], utc=True, errors="coerce").min() \
            if "timestamp" in group.columns else pd.NaT
        rows.append({"sweep_id": sweep, "started": started, "commit": _commit_text(group)})
    order = pd.DataFrame(rows)
    # a sweep id is its start time: it orders sweeps whose rows have no timestamp
    order = order.assign(_key=order["started"].fillna(pd.Timestamp.max.tz_localize("UTC")))
    return order.sort_values(["_key", "sweep_id"]).drop(columns="_key").reset_index(drop=True)


def _commit_text(group: pd.DataFrame) -> str:
    def first(column: str) -> object:
        if column not in group.columns:
            return None
        values = group[column].dropna()
        return values.iloc[0] if len(values) else None

    text = ""
    for commit, dirty in (("git_commit", "git_dirty"), ("user_git_commit", "user_git_dirty")):
        value = first(commit)
        if value is not None:
            part = str(value)[:7] + ("+" if first(dirty) is True else "")
            text = f"{text}/{part}" if text else part
    return text


def history(df: pd.DataFrame, *, alpha: float = 0.05, threshold: float = 0.03) -> History:
    """Follow every ``ok`` trial of ``df`` through its sweeps and judge each step.

    ``threshold`` is a fraction (0.03: a change under 3% is ``same``), as in compare.
    Raises ``ValueError`` when ``df`` has no timed trial.
    """
    ok, order = _timed_points(df)
    # what varies, and always the op and shape: a lone trial reads "add 4096", not "(all)"
    shown = {*label_columns(ok.drop(columns=["sweep_id"])), "op", "shape_str"}
    labels_of = [c for c in display_columns(ok) if c in shown]
    points, trials = [], []
    settings = StatsSettings(alpha=alpha, threshold=threshold)
    for trial_id, group in ok.groupby("trial_id", sort=False):
        time = "device" if _has(group, "gpu_time_median_us") else "loop"
        label = spec_label(group.iloc[0], labels_of)
        mine, before = [], None
        for _, row in group.iterrows():
            mine.append({"trial_id": trial_id, "op": row["op"], "trial": label, "time": time,
                         **_point(row, order, time),
                         **_step(before, row, time, settings)})
            before = row
        points += mine
        trials.append(_summary(trial_id, label, time, group, pd.DataFrame(mine)))
    points, trials = pd.DataFrame(points), pd.DataFrame(trials)
    groups = trial_groups(points)
    return History(points.assign(group=points["trial_id"].map(groups)),
                   trials.assign(group=trials["trial_id"].map(groups)))


def trial_groups(points: pd.DataFrame) -> dict[str, int]:
    """``trial_id`` -> its group: trials are in one group when a chain of shared sweeps links
    them. Groups are numbered from 1 in the order of their first sweep."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    for sweep, rows in points.groupby("sweep_index", sort=True):
        keys = [f"t:{t}" for t in rows["trial_id"]]
        for key in keys:
            parent[root(key)] = root(f"s:{sweep}")
    first = points.groupby("trial_id")["sweep_index"].min()
    roots = {t: root(f"t:{t}") for t in first.index}
    order = sorted(set(roots.values()), key=lambda r: min(first[t] for t in first.index
                                                          if roots[t] == r))
    number = {r: i + 1 for i, r in enumerate(order)}
    return {t: number[r] for t, r in roots.items()}


def _timed_points(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The timed ``ok`` rows, one per trial and sweep, with their sweep's place (``_sweep``)
    in the order of :func:`sweep_order`; and that order."""
    if df.empty or "trial_id" not in df.columns:
        raise ValueError("no trials in these results")
    ok = df[(df["status"].astype(str) == "ok")
            & pd.to_numeric(df["time_median_us"], errors="coerce").gt(0)]
    if ok.empty:
        raise ValueError("no timed (ok) trial in these results: nothing to follow")
    ok = with_modes(ok)
    order = sweep_order(ok)
    position = {sweep: i for i, sweep in enumerate(order["sweep_id"])}
    ok = ok.assign(_sweep=ok["sweep_id"].astype(str).map(position))
    # one point per trial and sweep (a resumed sweep may hold a trial twice: the last counts)
    ok = ok.sort_values(["_sweep", "timestamp"] if "timestamp" in ok else ["_sweep"])
    return ok.drop_duplicates(["trial_id", "_sweep"], keep="last"), order


def _point(row: pd.Series, order: pd.DataFrame, time: str) -> dict:
    """Where and when a point ran, and its time (median and CI)."""
    median_col, _, low_col, high_col = TIMES[time]
    return {"sweep_id": row["sweep_id"], "sweep_index": row["_sweep"],
            "commit": order["commit"].iloc[row["_sweep"]],
            "started": order["started"].iloc[row["_sweep"]],
            "median_us": float(row[median_col]), "ci_low_us": _float(row.get(low_col)),
            "ci_high_us": _float(row.get(high_col))}


def _step(before: pd.Series | None, row: pd.Series, time: str,
          settings: StatsSettings) -> dict:
    """The step from the point ``before`` (None: the first point, no step) to ``row``."""
    if before is None:
        return {"step": "", "change_pct": math.nan, "p_value": math.nan, "noisy": None}
    stats = compare_samples(_side(before, time), _side(row, time), settings)
    # a noisy pair is no step: the load of one run, not the code
    return {"step": stats.verdict if stats.verdict in ("faster", "slower") else "",
            "change_pct": (1.0 / stats.speedup - 1.0) * 100.0,
            "p_value": stats.p_value if stats.p_value is not None else math.nan,
            "noisy": stats.noisy_reason}


def _side(row: pd.Series, time: str) -> PairSide:
    """One point's ``time`` (raw samples, median, CI and noisy flag) as a side of a step."""
    median_col, samples_col, low_col, high_col = TIMES[time]
    return PairSide(_samples(row.get(samples_col)), float(row[median_col]),
                    ci=(_float(row.get(low_col)), _float(row.get(high_col))),
                    noisy=flag_or_reason(*(row.get(c) for c in NOISY[time])))


def _summary(trial_id: str, label: str, time: str, group: pd.DataFrame,
             mine: pd.DataFrame) -> dict:
    """A trial's row of ``History.trials``: first and last time, and its steps."""
    flagged = mine[mine["step"] != ""]
    return {"trial": label, "op": group["op"].iloc[0], "time": time, "sweeps": len(group),
            "first_us": mine["median_us"].iloc[0], "last_us": mine["median_us"].iloc[-1],
            "change_pct": (mine["median_us"].iloc[-1] / mine["median_us"].iloc[0] - 1) * 100,
            "steps": "; ".join(f"{r.step} {r.change_pct:+.1f}% at {where(r.commit, r.sweep_id)}"
                               for r in flagged.itertuples()),
            "trial_id": trial_id}


def _has(group: pd.DataFrame, column: str) -> bool:
    return column in group.columns and bool(
        pd.to_numeric(group[column], errors="coerce").gt(0).all())


def _float(value: object) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return out


def _samples(value: object) -> np.ndarray | None:
    if value is None or not hasattr(value, "__len__"):
        return None
    return np.asarray(value, dtype=float)


def write(result: History, out: Path) -> list[Path]:
    """``history.csv`` and one ``history_<name>.png`` per op and group into ``out``; the
    paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "history.csv"]
    result.points.to_csv(written[0], index=False)
    for name, fig in plot_history(result).items():
        path = out / f"history_{re.sub(r'[^A-Za-z0-9_.-]+', '_', str(name))}.png"
        fig.savefig(path, dpi=110)
        written.append(path)
    return written


def build_parser() -> OneLineArgumentParser:
    p = OneLineArgumentParser(
        prog=program("runner.history"),
        description="Each trial's time across sweeps and commits, with step changes flagged "
                    "by the statistics of runner.compare.")
    p.add_argument("sources", nargs="+", metavar="RESULTS",
                   help="sweep dirs, .parquet files, results roots or globs: one sweep or more "
                        "(one sweep is the first point of a history, with no step yet)")
    p.add_argument("--out", "-o", metavar="DIR",
                   help="where history.csv and the plots go (default <first source>/history)")
    p.add_argument("--format", choices=("table", "markdown", "html"), default="table")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--threshold", type=float, default=3.0, metavar="PCT",
                   help="smallest change in percent called a step (default 3)")
    p.add_argument("--fail-on", choices=("slower", "any", "never"), default="slower",
                   help="exit 1 when a step got slower (default), any step, or never")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = history(load(args.sources), alpha=args.alpha, threshold=args.threshold / 100)
    except ValueError as exc:  # includes ResultsNotFoundError
        fail(str(exc), prog=parser.prog)
    first = Path(args.sources[0])
    out = Path(args.out) if args.out else (first if first.is_dir() else first.parent) / "history"
    try:
        written = write(result, out)
    except OSError as exc:
        fail(f"cannot write the history: {exc}", prog=parser.prog)
    sys.stdout.write(render(result, args.format))
    sweeps = result.points["sweep_id"].nunique()
    print(f"{len(result.trials)} trials over {sweeps} sweep(s) → {os.fspath(out)} "
          f"({len(written) - 1} plot(s), history.csv)", file=sys.stderr)
    if sweeps == 1:
        print("one sweep: the first point of each trial's history, no step to judge yet; "
              "run history again over this sweep and later ones", file=sys.stderr)
    verdicts = {"slower": ("slower",), "any": ("slower", "faster"), "never": ()}[args.fail_on]
    flagged = result.steps(verdicts)
    for r in flagged.itertuples():
        print(f"step: {r.trial}: {r.step} {r.change_pct:+.1f}% at {where(r.commit, r.sweep_id)}",
              file=sys.stderr)
    return 1 if len(flagged) else 0


if __name__ == "__main__":
    sys.exit(main())
