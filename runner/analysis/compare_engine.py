"""The comparison itself: each spec present on both sides becomes a judged pair.

Why: a benchmark number alone says little; the question is almost always "did this change
make it faster or slower, and is that real?". :func:`compare` joins BASE and NEW on their
spec (:mod:`runner.analysis.compare_join`) and gives each pair a speedup, a 95% bootstrap CI,
a Mann-Whitney p-value and a verdict (``runner.analysis.significance`` has the rule).

Which time: a CUDA trial has a loop time (what eager code pays on this host) and a device
time (``gpu_time_*``, docs/timing.md). The loop time of a launch-bound op moves by 25-35%
between two processes of the same sweep, the device time by about 1%. So ``time="auto"``
judges a pair on its device time where both rows have one, else on its loop time, and
shows the other time beside it; ``time="loop"`` gates host cost on purpose.

Which metric: ``metric="time"`` (default) compares times as above. Any other entry of
:data:`METRICS` compares one scalar per trial where lower is better (energy per call, kernel
time, power, kernel count), so ``speedup`` = base/new keeps meaning "> 1: NEW better". A
scalar has no samples: no p-value, its CI is the point, and the verdict rests on the
threshold. It ignores ``time`` (the time by the auto rule is shown beside it as context).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import pandas as pd

from runner.analysis.compare_join import (
    USER_NAMES,
    axis_notes,
    collapse,
    joined,
    median_of,
    no_gpu_reason,
    one_side,
    pick_time,
    spec_dict,
    timer_note,
)
from runner.analysis.compare_options import METRIC_SETTING, METRICS, CompareOptions
from runner.analysis.selection import canonical, spec_label
from runner.analysis.significance import (
    PairSide,
    PairStats,
    compare_samples,
    fastest,
    geomean_ci,
)
from runner.analysis.values import fmt_time_us

#: Statuses of NEW that count as a regression when BASE was ok.
FAILED_STATUSES = ("error", "oom")

_PAIR_COLUMNS = ["trial", "verdict", "time", "base_us", "new_us", "speedup", "ci_low",
                 "ci_high", "p_value", "change_pct", "noise_pct", "base_other_us",
                 "new_other_us", "base_fastest_us", "new_fastest_us", "base_trials",
                 "new_trials", "note"]


@dataclass
class Comparison:
    """The outcome of :func:`compare`.

    pairs
        One row per spec present and ``ok`` on both sides: ``trial`` (label), ``verdict``,
        ``time`` (``gpu`` or ``loop``: the time that decided), ``base_us``/``new_us`` (its
        medians), ``base_other_us``/``new_other_us`` (the other time's medians),
        ``base_fastest_us``/``new_fastest_us`` (the fastest raw sample of the time that
        decided: what the regression gate reads on a noisy pair),
        ``speedup`` (base/new, > 1 = NEW faster),
        ``ci_low``/``ci_high`` (95%), ``p_value``, ``change_pct`` ((new/base - 1) * 100),
        ``noise_pct``, ``base_trials``/``new_trials`` (rows pooled), plus the spec columns.
        With a ``metric`` other than time, ``base_value``/``new_value`` hold the metric and
        decide; ``time``/``base_us``/``new_us`` are the auto-rule time, for context.
    not_compared
        Specs on both sides where either side is not ``ok`` or lacks the metric: why.
    only_base, only_new
        Specs found on one side only (with their status).
    axis_notes
        Why specs did not match: columns present on one side only, values present on one
        side only, with the ``--ignore-axis`` hint.
    """

    pairs: pd.DataFrame
    not_compared: pd.DataFrame
    only_base: pd.DataFrame
    only_new: pd.DataFrame
    key_columns: list[str]
    label_columns: list[str]
    geomean: float = float("nan")
    geomean_low: float = float("nan")
    geomean_high: float = float("nan")
    axis_notes: list[str] = field(default_factory=list)
    alpha: float = 0.05
    threshold: float = 0.03
    time: str = "auto"
    metric: str = "time"

    def counts(self) -> dict[str, int]:
        """How many pairs got each verdict, and how many specs were not compared."""
        verdicts = self.pairs["verdict"].value_counts() if len(self.pairs) else {}
        return {"faster": int(verdicts.get("faster", 0)), "slower": int(verdicts.get("slower", 0)),
                "same": int(verdicts.get("same", 0)), "noisy": int(verdicts.get("noisy", 0)),
                "not_compared": len(self.not_compared),
                "only_base": len(self.only_base), "only_new": len(self.only_new)}

    def regressions(self, pct: float) -> list[str]:
        """One line per regression of at least ``pct`` percent (and per newly failing trial)."""
        out = []
        for _, row in self.pairs.iterrows():
            if row["verdict"] == "slower" and row["change_pct"] >= pct:
                out.append(f"{row['trial']}: {row['change_pct']:+.1f}% "
                           f"({self.fmt_value(row, 'base')} -> {self.fmt_value(row, 'new')})")
        for _, row in self.not_compared.iterrows():
            if row["base_status"] == "ok" and row["new_status"] in FAILED_STATUSES:
                out.append(f"{row['trial']}: ok in BASE, {row['new_status']} in NEW "
                           f"({row['new_reason']})")
        return out

    def noisy(self) -> list[str]:
        """One line per ``noisy`` pair (never ``slower``): the trial, its change, and what
        was seen on which side."""
        return [f"{row['trial']}: {row['change_pct']:+.1f}% not judged ({row['note']})"
                for _, row in self.pairs.iterrows() if row["verdict"] == "noisy"]

    def fmt_value(self, row: pd.Series, side: str) -> str:
        """The value that decided a pair on one ``side`` (base/new): a time or the metric."""
        if self.metric == "time":
            return fmt_time_us(row[f"{side}_us"])
        return f"{row[f'{side}_value']:.4g} {self.metric}"

    def to_frame(self) -> pd.DataFrame:
        """Every spec in one table with a ``result`` column (faster/slower/same/not_compared/
        only_base/only_new), then a ``GEOMEAN`` row: the CSV output."""
        parts = [self.pairs.assign(result=self.pairs["verdict"])]
        if len(self.not_compared):
            parts.append(self.not_compared.assign(result="not_compared"))
        if len(self.only_base):
            parts.append(self.only_base.assign(result="only_base"))
        if len(self.only_new):
            parts.append(self.only_new.assign(result="only_new"))
        parts.append(pd.DataFrame([{"trial": "GEOMEAN", "result": "geomean",
                                    "speedup": self.geomean, "ci_low": self.geomean_low,
                                    "ci_high": self.geomean_high}]))
        frame = pd.concat([p for p in parts if len(p)], ignore_index=True)
        first = ["trial", "result", "metric", "base_value", "new_value", "time", "base_us",
                 "new_us", "speedup", "ci_low", "ci_high", "p_value", "change_pct",
                 "noise_pct", "base_status", "new_status", "base_reason", "new_reason",
                 "status", "reason"]
        first = [c for c in first if c in frame.columns]
        rest = [c for c in frame.columns if c not in first and c not in ("verdict",)]
        return frame[first + rest]


def compare(base: pd.DataFrame, new: pd.DataFrame, options: CompareOptions | None = None,
            **changes: Any) -> Comparison:
    """Join BASE and NEW trials on their spec and compare each pair, as ``options`` says
    (:class:`CompareOptions`: filters, ignored axes, the verdict rule, which time or metric).
    ``changes``: fields of :class:`CompareOptions` by name, over ``options``
    (``compare(base, new, time="gpu")``); another name is a TypeError naming the options.
    """
    unknown = sorted(set(changes) - {f.name for f in fields(CompareOptions)})
    if unknown:
        raise TypeError(f"compare() got {unknown[0]}={changes[unknown[0]]!r}: not an option; "
                        f"options are {', '.join(f.name for f in fields(CompareOptions))}")
    options = replace(options or CompareOptions(), **changes)
    options.check()
    time, metric = options.time, options.metric
    base, new, keys, shown, label_cols = joined(base, new, list(options.filters), options.ignore)
    base_specs = collapse(base, [*keys, *shown], METRICS[metric])
    new_specs = collapse(new, [*keys, *shown], METRICS[metric])
    rows, not_compared, reps = [], [], []
    for key in (k for k in base_specs if k in new_specs):
        b, n = base_specs[key], new_specs[key]
        spec = spec_dict(b["row"], keys)
        label = spec_label(spec, label_cols) + _ignored_label(b["row"], n["row"], shown)
        why = _not_comparable(b, n, time, metric)
        if why is not None:
            not_compared.append({"trial": label, "base_status": b["status"],
                                 "new_status": n["status"], "base_reason": why[0],
                                 "new_reason": why[1], **spec})
            continue
        row, st = _judge(b, n, options, zlib.crc32(key.encode()))
        rows.append({"trial": label, **row, **spec})
        reps.append(st.log_replicates)
    g, lo, hi = _geomean(rows, reps)
    only_base = one_side(base_specs, new_specs, keys, label_cols)
    only_new = one_side(new_specs, base_specs, keys, label_cols)
    return Comparison(
        pairs=pd.DataFrame(rows, columns=_PAIR_COLUMNS + keys if not rows else None),
        not_compared=pd.DataFrame(not_compared), only_base=only_base, only_new=only_new,
        key_columns=keys, label_columns=label_cols, geomean=g, geomean_low=lo, geomean_high=hi,
        axis_notes=axis_notes(base, new, keys) if len(only_base) or len(only_new) else [],
        alpha=options.alpha, threshold=options.threshold, time=time, metric=metric)


def _geomean(rows: list[dict], reps: list[np.ndarray]) -> tuple[float, float, float]:
    """The geometric-mean speedup of the judged pairs and its 95% CI (pairs with a finite,
    positive speedup only)."""
    finite = [i for i, r in enumerate(rows) if r["speedup"] > 0 and math.isfinite(r["speedup"])]
    return geomean_ci(np.log([rows[i]["speedup"] for i in finite]),
                      np.vstack([reps[i] for i in finite]) if finite else None)


def _ignored_label(base_row: dict, new_row: dict, columns: list[str]) -> str:
    """`` shape 64x64x64 → 128x128x128``: an ignored axis whose value differs between a
    pair's sides, so that the table still says what was compared with what."""
    parts = [f"{USER_NAMES.get(col, col.removeprefix('param_'))} "
             f"{canonical(base_row.get(col))} → {canonical(new_row.get(col))}"
             for col in sorted(columns)
             if canonical(base_row.get(col)) != canonical(new_row.get(col))]
    return "".join(f" {p}" for p in parts)


def _not_comparable(b: dict, n: dict, time: str, metric: str) -> tuple | None:
    """``(base_reason, new_reason)`` when a pair cannot be judged, else None."""
    if b["status"] != "ok" or n["status"] != "ok":
        return b["reason"], n["reason"]
    if metric != "time":
        if b["value"] > 0 and n["value"] > 0:
            return None
        missing = f"no {metric} (run with {METRIC_SETTING.get(metric, 'energy=true')})"
        return (None if b["value"] > 0 else missing), (None if n["value"] > 0 else missing)
    if pick_time(b["times"], n["times"], time) is None:
        return no_gpu_reason(b), no_gpu_reason(n)
    return None


def _judge(b: dict, n: dict, options: CompareOptions, seed: int) -> tuple[dict, PairStats]:
    """The pair row (less trial and spec) and its statistics; the pair's bootstrap draws
    from ``seed``."""
    metric, settings = options.metric, options.stats(seed)
    if metric == "time":
        which = pick_time(b["times"], n["times"], options.time)
        other = "loop" if which == "gpu" else "gpu"
        bt, nt = b["times"][which], n["times"][which]
        st = compare_samples(_side(bt), _side(nt), settings)
        row = {"base_us": bt["median"], "new_us": nt["median"],
               "base_other_us": median_of(b["times"].get(other)),
               "new_other_us": median_of(n["times"].get(other)),
               "base_fastest_us": fastest(bt["samples"]), "new_fastest_us": fastest(nt["samples"])}
    else:  # one value per trial: no samples, no p-value; the auto-rule time as context
        which = pick_time(b["times"], n["times"], "auto")
        st = compare_samples(PairSide(None, b["value"]), PairSide(None, n["value"]), settings)
        row = {"metric": metric, "base_value": b["value"], "new_value": n["value"],
               "base_us": median_of(b["times"].get(which)),
               "new_us": median_of(n["times"].get(which))}
    change = (1.0 / st.speedup - 1.0) * 100.0 if st.speedup > 0 else np.nan
    return {"verdict": st.verdict, "time": which, **row, "speedup": st.speedup,
            "ci_low": st.ci_low, "ci_high": st.ci_high, "p_value": st.p_value,
            "change_pct": change, "noise_pct": st.noise * 100.0, "base_trials": b["count"],
            "new_trials": n["count"],
            # the noisy verdict's reason already says which side is noisy, and why
            "note": "; ".join(filter(None, (st.noisy_reason, timer_note(
                b["row"], n["row"], None if st.noisy_reason or metric != "time" else which))))
            }, st


def _side(timing: dict) -> PairSide:
    """One side's time (``compare_join``'s samples, median, CI and noisy flag) to judge."""
    return PairSide(timing["samples"], timing["median"], timing["ci"], timing.get("noisy"))
