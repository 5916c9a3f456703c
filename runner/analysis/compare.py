"""Compare two result sets trial by trial: ``python -m runner.compare BASE NEW``.

Why: a benchmark number alone says little; the question is almost always "did this change
make it faster or slower, and is that real?". Trials of BASE and NEW are joined on their
spec (axes + op params; never on ids or timestamps, which differ between runs). Each pair
gets a speedup, a 95% bootstrap CI, a Mann-Whitney p-value and a verdict (see
``runner.analysis.significance`` for the rule), and a geometric mean closes the table. Nothing is
dropped silently: trials present on one side only are listed with the axes that differ,
and pairs where either side is not ``ok`` are listed with their status instead of a speedup.

Which time: each trial has a loop time (what eager code pays on this host) and, on CUDA, a
device time (``gpu_time_*``: the GPU's own time, independent of the host; docs/timing.md).
The loop time of a launch-bound op moves by 25-35% between two processes of the same sweep,
the device time by about 1%. So by default (``--time auto``) a pair is judged on its device
time wherever both rows have one, else on its loop time; the other time is shown beside it
and the ``time`` column says which decided. ``--time loop`` gates host cost on purpose.

Exit status: 0, or 1 with ``--fail-on-regression PCT`` when some trial got significantly
slower by at least PCT percent (or failed in NEW after passing in BASE); 2 for bad arguments.
"""

from __future__ import annotations

import io
import math
import sys
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from runner.analysis.selection import (
    apply_filters,
    canonical,
    param_columns,
    spec_columns,
    spec_keys,
    spec_label,
    varying_columns,
)
from runner.analysis.significance import N_BOOT, compare_samples, geomean_ci
from runner.analysis.values import (
    fmt_p,
    fmt_ratio,
    fmt_time_us,
    is_missing,
    markdown_table,
)
from runner.cli import OneLineArgumentParser, fail
from runner.storage.columns import time_column
from runner.storage.load import load

#: Statuses of NEW that count as a regression when BASE was ok.
FAILED_STATUSES = ("error", "oom")
#: ``--time`` choices: auto (device time where both rows have it, else loop), gpu, loop.
TIME_CHOICES = ("auto", "gpu", "loop")

_PAIR_COLUMNS = ["trial", "verdict", "time", "base_us", "new_us", "speedup", "ci_low",
                 "ci_high", "p_value", "change_pct", "noise_pct", "base_other_us",
                 "new_other_us", "base_trials", "new_trials", "note"]
#: Timer settings that, when they differ between the two runs of a trial, are noted:
#: e.g. an adaptive calls_per_sample of 11 vs 1 changes what a 3 µs op measures.
_TIMER_FIELDS = ("timer_preset", "l2_flush")


@dataclass
class Comparison:
    """The outcome of :func:`compare`.

    pairs
        One row per spec present and ``ok`` on both sides: ``trial`` (label), ``verdict``,
        ``time`` (``gpu`` or ``loop``: the time that decided), ``base_us``/``new_us`` (its
        medians), ``base_other_us``/``new_other_us`` (the other time's medians),
        ``speedup`` (base/new, > 1 = NEW faster),
        ``ci_low``/``ci_high`` (95%), ``p_value``, ``change_pct`` ((new/base - 1) * 100),
        ``noise_pct``, ``base_trials``/``new_trials`` (rows pooled), plus the spec columns.
    not_compared
        Specs on both sides where either side is not ``ok``: statuses and reasons.
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

    def counts(self) -> dict[str, int]:
        """How many pairs got each verdict, and how many specs were not compared."""
        verdicts = self.pairs["verdict"].value_counts() if len(self.pairs) else {}
        return {"faster": int(verdicts.get("faster", 0)), "slower": int(verdicts.get("slower", 0)),
                "same": int(verdicts.get("same", 0)), "not_compared": len(self.not_compared),
                "only_base": len(self.only_base), "only_new": len(self.only_new)}

    def regressions(self, pct: float) -> list[str]:
        """One line per regression of at least ``pct`` percent (and per newly failing trial)."""
        out = []
        for _, row in self.pairs.iterrows():
            if row["verdict"] == "slower" and row["change_pct"] >= pct:
                out.append(f"{row['trial']}: {row['change_pct']:+.1f}% "
                           f"({fmt_time_us(row['base_us'])} -> {fmt_time_us(row['new_us'])})")
        for _, row in self.not_compared.iterrows():
            if row["base_status"] == "ok" and row["new_status"] in FAILED_STATUSES:
                out.append(f"{row['trial']}: ok in BASE, {row['new_status']} in NEW "
                           f"({row['new_reason']})")
        return out

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
        first = ["trial", "result", "time", "base_us", "new_us", "speedup", "ci_low", "ci_high",
                 "p_value", "change_pct", "noise_pct", "base_status", "new_status",
                 "base_reason", "new_reason", "status", "reason"]
        first = [c for c in first if c in frame.columns]
        rest = [c for c in frame.columns if c not in first and c not in ("verdict",)]
        return frame[first + rest]


def compare(base: pd.DataFrame, new: pd.DataFrame, *, filters: Iterable[str] = (),
            ignore: Iterable[str] = (), alpha: float = 0.05, threshold: float = 0.03,
            time: str = "auto", n_boot: int = N_BOOT) -> Comparison:
    """Join BASE and NEW trials on their spec and compare each pair.

    filters
        ``axis=value[,value]`` strings applied to both sides (``op=matmul``, ``impl=cublas``).
    ignore
        Axes left out of the join (e.g. ``device_requested`` to compare cpu with cuda, or a
        ``param_*`` that only one side has).
    alpha, threshold
        Significance level and minimum effect (fraction) of the verdict rule.
    time
        ``auto``: the device time (``gpu_time_*``) where both rows have one, else the loop
        time; ``gpu``: the device time only (pairs without it are not compared); ``loop``:
        the loop time, host cost included (what eager code pays), for every pair.
    """
    if time not in TIME_CHOICES:
        raise ValueError(f"time={time!r} is not one of {', '.join(TIME_CHOICES)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha} must be between 0 and 1 (e.g. 0.05)")
    if threshold < 0:
        raise ValueError(f"threshold={threshold} must be >= 0 (a fraction, e.g. 0.03 for 3%)")
    filters = list(filters)
    if filters:
        base = apply_filters(base, filters)
        new = apply_filters(new, filters)
    ignored = {_axis_name(a, base, new) for a in ignore}
    keys = _key_columns(base, new, ignored)
    base = base.assign(_key=spec_keys(base, keys)) if len(base) else base.assign(_key=[])
    new = new.assign(_key=spec_keys(new, keys)) if len(new) else new.assign(_key=[])
    both = pd.concat([base[[c for c in keys if c in base.columns]],
                      new[[c for c in keys if c in new.columns]]], ignore_index=True)
    # target is implied by op; it stays in the join but would only clutter the labels
    label_cols = ["op", *[c for c in varying_columns(both, keys) if c not in ("op", "target")]]
    label_cols = [c for c in dict.fromkeys(label_cols) if c in both.columns]

    base_specs = _collapse(base, keys)
    new_specs = _collapse(new, keys)
    common = [k for k in base_specs if k in new_specs]
    rows, not_compared, reps = [], [], []
    for key in common:
        b, n = base_specs[key], new_specs[key]
        spec = _spec_dict(b["row"], keys)
        label = spec_label(spec, label_cols)
        if b["status"] != "ok" or n["status"] != "ok":
            not_compared.append({"trial": label, "base_status": b["status"],
                                 "new_status": n["status"], "base_reason": b["reason"],
                                 "new_reason": n["reason"], **spec})
            continue
        which = pick_time(b["times"], n["times"], time)
        if which is None:
            not_compared.append({"trial": label, "base_status": b["status"],
                                 "new_status": n["status"],
                                 "base_reason": _no_gpu_reason(b), "new_reason":
                                 _no_gpu_reason(n), **spec})
            continue
        other = "loop" if which == "gpu" else "gpu"
        bt, nt = b["times"][which], n["times"][which]
        st = compare_samples(bt["samples"], nt["samples"], bt["median"], nt["median"],
                             base_ci=bt["ci"], new_ci=nt["ci"], alpha=alpha,
                             threshold=threshold, n_boot=n_boot,
                             seed=zlib.crc32(key.encode()))
        rows.append({"trial": label, "verdict": st.verdict, "time": which,
                     "base_us": bt["median"], "new_us": nt["median"],
                     "base_other_us": _median_of(b["times"].get(other)),
                     "new_other_us": _median_of(n["times"].get(other)),
                     "speedup": st.speedup, "ci_low": st.ci_low,
                     "ci_high": st.ci_high, "p_value": st.p_value,
                     "change_pct": (1.0 / st.speedup - 1.0) * 100.0 if st.speedup > 0 else np.nan,
                     "noise_pct": st.noise * 100.0, "base_trials": b["count"],
                     "new_trials": n["count"],
                     "note": _timer_note(b["row"], n["row"], which),
                     **spec})
        reps.append(st.log_replicates)
    pairs = pd.DataFrame(rows, columns=_PAIR_COLUMNS + keys if not rows else None)
    finite = [i for i, r in enumerate(rows) if r["speedup"] > 0 and math.isfinite(r["speedup"])]
    g, lo, hi = geomean_ci(np.log([rows[i]["speedup"] for i in finite]),
                           np.vstack([reps[i] for i in finite]) if finite else None)
    only_base = _one_side(base_specs, new_specs, keys, label_cols)
    only_new = _one_side(new_specs, base_specs, keys, label_cols)
    notes = _axis_notes(base, new, keys) if len(only_base) or len(only_new) else []
    return Comparison(pairs=pairs, not_compared=pd.DataFrame(not_compared),
                      only_base=only_base, only_new=only_new, key_columns=keys,
                      label_columns=label_cols, geomean=g, geomean_low=lo, geomean_high=hi,
                      axis_notes=notes, alpha=alpha, threshold=threshold, time=time)


def _axis_name(name: str, base: pd.DataFrame, new: pd.DataFrame) -> str:
    if name in base.columns or name in new.columns:
        return name
    if f"param_{name}" in base.columns or f"param_{name}" in new.columns:
        return f"param_{name}"
    raise ValueError(f"--ignore-axis {name!r}: no such column in BASE or NEW; "
                     f"axes are: {', '.join(spec_columns(base) or spec_columns(new))}")


def _key_columns(base: pd.DataFrame, new: pd.DataFrame, ignored: set[str]) -> list[str]:
    axes = [c for c in spec_columns(base, ignored) if not c.startswith("param_")]
    axes += [c for c in spec_columns(new, ignored) if not c.startswith("param_")]
    keys = list(dict.fromkeys(axes))
    params = sorted(set(param_columns(base)) | set(param_columns(new)))
    if params:  # param_* columns say it all; params_json would also hold ignored params
        keys = [c for c in keys if c != "params_json"]
        keys += [c for c in params if c not in ignored]
    return keys


#: The columns each time is read from (runner.storage.columns.time_column).
_TIME_FIELDS = {t: {stat: time_column(t, stat) for stat in
                    ("samples_us", "median_us", "ci_low_us", "ci_high_us", "noisy")}
                for t in ("loop", "gpu")}
#: Columns a collapsed spec record keeps from its first row (besides the spec keys).
_ROW_FIELDS = ("status", "reason", *(c for t in _TIME_FIELDS.values() for c in t.values()
                                     if not c.endswith("samples_us")),
               "gpu_time_method", "gpu_time_reason", "bound", "sm_clock_mhz_end",
               "throttle_reasons_end", *_TIMER_FIELDS)


def _collapse(df: pd.DataFrame, keys: Sequence[str]) -> dict[str, dict]:
    """One record per spec key. Rows repeating a spec (repeated sweeps, merged globs) are
    pooled: their raw samples concatenated, ok rows preferred over failed ones.

    Works on column lists rather than per-group DataFrames: thousands of specs stay fast.
    """
    out: dict[str, dict] = {}
    if not len(df):
        return out
    fields = [c for c in dict.fromkeys([*keys, *_ROW_FIELDS]) if c in df.columns]
    columns = {c: df[c].astype(object).tolist() for c in fields}
    samples_cols = {t: df[f["samples_us"]].tolist() if f["samples_us"] in df.columns else None
                    for t, f in _TIME_FIELDS.items()}
    status = columns.get("status", ["ok"] * len(df))
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(df["_key"].tolist()):
        groups.setdefault(key, []).append(i)
    for key, idx in groups.items():
        ok = [i for i in idx if status[i] == "ok"]
        chosen = ok or idx
        first = {c: columns[c][chosen[0]] for c in fields}
        times = {t: _pooled_time(first, samples_cols[t], ok, len(chosen), f)
                 for t, f in _TIME_FIELDS.items()}
        state = first.get("status")
        out[key] = {"row": first, "status": "ok" if state is None else str(state),
                    "reason": first.get("reason"), "count": len(chosen),
                    "times": {t: v for t, v in times.items() if v is not None}}
    return out


def _pooled_time(first: dict, samples_col: list | None, ok: list[int], n_rows: int,
                 fields: dict[str, str]) -> dict | None:
    """One time of a spec: pooled raw samples, median and (single row) CI; None when no
    row has it (a CPU trial's device time, or a file older than the column)."""
    samples = None
    if samples_col is not None and ok:
        arrays = [np.asarray(samples_col[i], dtype=float) for i in ok
                  if samples_col[i] is not None and not is_missing_array(samples_col[i])]
        arrays = [a for a in arrays if len(a)]
        samples = np.concatenate(arrays) if arrays else None
    median = float(np.median(samples)) if samples is not None else \
        _float(first.get(fields["median_us"]))
    if not math.isfinite(median):
        return None
    ci = (_float(first.get(fields["ci_low_us"])), _float(first.get(fields["ci_high_us"]))) \
        if n_rows == 1 else None
    return {"samples": samples, "median": median, "ci": ci,
            "noisy": canonical(first.get(fields["noisy"]))}


def pick_time(base_times: dict, new_times: dict, time: str = "auto") -> str | None:
    """The time a pair is judged on: ``gpu`` when asked (auto or gpu) and both sides have
    it, else ``loop`` (unless ``time == "gpu"``: then None, the pair is not compared)."""
    both_gpu = "gpu" in base_times and "gpu" in new_times
    if time in ("auto", "gpu") and both_gpu:
        return "gpu"
    if time == "gpu":
        return None
    return "loop" if "loop" in base_times and "loop" in new_times else None


def _median_of(record: dict | None) -> float:
    return record["median"] if record else float("nan")


def _no_gpu_reason(rec: dict) -> str | None:
    if "gpu" in rec["times"]:
        return None
    row = rec["row"]
    why = row.get("gpu_time_reason") or "no gpu_time column"
    return f"--time gpu: no gpu_time ({canonical(row.get('gpu_time_method')) or '-'}: {why})"


#: SM clocks further apart than this (relative) make two timings hard to compare.
CLOCK_NOTE_REL = 0.05


def _timer_note(base_row: dict, new_row: dict, which: str = "loop") -> str:
    """Why two timings may not be comparable: different timer settings, a noisy run (of the
    time that decided), a different GPU clock or a throttled GPU."""
    bits = []
    for name in _TIMER_FIELDS:
        b, n = canonical(base_row.get(name)), canonical(new_row.get(name))
        if b is not None and n is not None and b != n:
            bits.append(f"{name} {b} vs {n}")
    noisy_col = _TIME_FIELDS[which]["noisy"]
    noisy = [side for side, row in (("BASE", base_row), ("NEW", new_row))
             if canonical(row.get(noisy_col)) is True]
    if noisy:
        bits.append(f"noisy in {' and '.join(noisy)}")
    clocks = [canonical(row.get("sm_clock_mhz_end")) for row in (base_row, new_row)]
    if all(isinstance(c, (int, float)) and c > 0 for c in clocks) and \
            abs(clocks[0] - clocks[1]) > CLOCK_NOTE_REL * max(clocks):
        bits.append(f"SM clock {clocks[0]:.0f} vs {clocks[1]:.0f} MHz")
    throttled = [side for side, row in (("BASE", base_row), ("NEW", new_row))
                 if canonical(row.get("throttle_reasons_end")) not in (None, "")]
    if throttled:
        bits.append(f"throttled in {' and '.join(throttled)}")
    return "; ".join(bits)


def is_missing_array(value: object) -> bool:
    """True for a missing samples cell (None/NaN) as opposed to an array."""
    return not isinstance(value, (list, tuple, np.ndarray)) and is_missing(value)


def _float(value: object) -> float:
    return float("nan") if is_missing(value) else float(value)


def _spec_dict(row: dict, keys: Sequence[str]) -> dict:
    return {k: canonical(row.get(k)) for k in keys}


def _one_side(specs: dict[str, dict], other: dict[str, dict], keys: list[str],
              label_cols: list[str]) -> pd.DataFrame:
    rows = []
    for key, rec in specs.items():
        if key in other:
            continue
        spec = _spec_dict(rec["row"], keys)
        rows.append({"trial": spec_label(spec, label_cols), "status": rec["status"],
                     "reason": rec["reason"], **spec})
    return pd.DataFrame(rows)


def _axis_notes(base: pd.DataFrame, new: pd.DataFrame, keys: list[str]) -> list[str]:
    """Explain why specs did not match: which axes differ between the two sides."""
    if not len(base) or not len(new):
        side = "BASE" if not len(base) else "NEW"
        return [f"{side} has no trials (after filters): nothing to match against"]
    notes = []
    for col in keys:
        in_b, in_n = col in base.columns, col in new.columns
        if in_b != in_n:
            side, frame = ("BASE", base) if in_b else ("NEW", new)
            values = sorted({str(canonical(v)) for v in frame[col].astype(object)})
            notes.append(f"column {col} only in {side} (values: {', '.join(values[:8])}); "
                         f"--ignore-axis {col} joins without it")
            continue
        vb = {canonical(v) for v in base[col].astype(object)} if len(base) else set()
        vn = {canonical(v) for v in new[col].astype(object)} if len(new) else set()
        if vb != vn:
            parts = []
            if vb - vn:
                parts.append("only BASE has " + ", ".join(sorted(map(str, vb - vn))[:8]))
            if vn - vb:
                parts.append("only NEW has " + ", ".join(sorted(map(str, vn - vb))[:8]))
            notes.append(f"axis {col}: " + "; ".join(parts))
    return notes


# ----------------------------------------------------------------------------- output


def render(result: Comparison, fmt: str = "table", *, base_name: str = "BASE",
           new_name: str = "NEW", width: int | None = None) -> str:
    """The comparison as text: ``table`` (rich), ``csv`` or ``markdown``."""
    if fmt == "csv":
        buf = io.StringIO()
        result.to_frame().to_csv(buf, index=False)
        return buf.getvalue()
    if fmt == "markdown":
        return _render_markdown(result, base_name, new_name)
    if fmt == "table":
        return _render_rich(result, base_name, new_name, width)
    raise ValueError(f"format {fmt!r} is not one of table, csv, markdown")


def _pair_cells(row: pd.Series, with_note: bool) -> list[str]:
    other = "-" if is_missing(row["base_other_us"]) or is_missing(row["new_other_us"]) else \
        f"{fmt_time_us(row['base_other_us'])} → {fmt_time_us(row['new_other_us'])}"
    cells = [row["trial"], row["time"], fmt_time_us(row["base_us"]),
             fmt_time_us(row["new_us"]), fmt_ratio(row["speedup"]),
             f"[{row['ci_low']:.3g}, {row['ci_high']:.3g}]", fmt_p(row["p_value"]),
             f"{row['noise_pct']:.1f}%", row["verdict"], other]
    return cells + [row.get("note") or ""] if with_note else cells


_PAIR_HEADERS = ["trial", "time", "base", "new", "speedup", "95% CI", "p", "noise", "verdict",
                 "other time"]


def _headers(result: Comparison) -> tuple[list[str], bool]:
    with_note = "note" in result.pairs.columns and result.pairs["note"].fillna("").ne("").any()
    return _PAIR_HEADERS + (["note"] if with_note else []), with_note


def summary_line(result: Comparison) -> str:
    """``N compared: a faster, b slower, c same; geomean 1.02x [0.99, 1.05]``."""
    c = result.counts()
    n = c["faster"] + c["slower"] + c["same"]
    line = f"{n} compared: {c['faster']} faster, {c['slower']} slower, {c['same']} same"
    if n:
        line += (f"; geomean speedup {fmt_ratio(result.geomean)} "
                 f"[{result.geomean_low:.3g}, {result.geomean_high:.3g}]")
    extra = [f"{c[k]} {k.replace('_', ' ')}" for k in ("not_compared", "only_base", "only_new")
             if c[k]]
    if extra:
        line += "; " + ", ".join(extra)
    return line


def rule_line(result: Comparison) -> str:
    """The verdict rule in force, printed under every output."""
    which = {"auto": "gpu (device time) where both rows have it, else loop time",
             "gpu": "gpu (device time) only", "loop": "loop time (host cost included)"}
    return (f"verdict: faster/slower need p < {result.alpha:g}, a 95% CI excluding 1 and "
            f"|speedup-1| >= max({result.threshold * 100:g}%, noise); speedup = base/new "
            f"(> 1: NEW faster); time: {which[result.time]} (--time {result.time})")


def _render_markdown(result: Comparison, base_name: str, new_name: str) -> str:
    out = [f"## {base_name} → {new_name}", ""]
    if len(result.pairs):
        headers, with_note = _headers(result)
        out.append(markdown_table(headers, (_pair_cells(r, with_note)
                                            for _, r in result.pairs.iterrows())))
        out.append("")
    out += [f"**{summary_line(result)}**", "", rule_line(result), ""]
    out += _side_sections_md(result)
    return "\n".join(out).rstrip() + "\n"


def _side_sections_md(result: Comparison) -> list[str]:
    out = []
    if len(result.not_compared):
        out += ["### Not compared (not ok on a side)", "",
                markdown_table(["trial", "base", "new", "reason"],
                               ([r["trial"], r["base_status"], r["new_status"],
                                 _reason(r)] for _, r in result.not_compared.iterrows())), ""]
    for title, frame in (("Only in BASE", result.only_base), ("Only in NEW", result.only_new)):
        if len(frame):
            out += [f"### {title}", "", markdown_table(
                ["trial", "status"], ([r["trial"], r["status"]] for _, r in frame.iterrows())), ""]
    if result.axis_notes:
        out += ["### Why some trials did not match", ""]
        out += [f"- {n}" for n in result.axis_notes] + [""]
    return out


def _reason(row: pd.Series) -> str:
    reasons = [str(row[k]) for k in ("new_reason", "base_reason")
               if k in row and not is_missing(row[k])]
    return (reasons[0] if reasons else "").splitlines()[0][:120] if reasons else ""


def _render_rich(result: Comparison, base_name: str, new_name: str, width: int | None) -> str:
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, width=width or 140, force_terminal=False, no_color=True,
                      highlight=False)
    if len(result.pairs):
        table = Table(title=f"{base_name} → {new_name}", show_lines=False)
        headers, with_note = _headers(result)
        for h in headers:
            text = h in ("trial", "time", "note")
            table.add_column(h, justify="left" if text else "right",
                             overflow="fold" if h in ("trial", "note") else "ellipsis")
        for _, row in result.pairs.iterrows():
            table.add_row(*_pair_cells(row, with_note))
        console.print(table)
    else:
        console.print(f"{base_name} → {new_name}: no trial could be compared.")
    console.print(summary_line(result), markup=False)
    console.print(rule_line(result), markup=False)
    if len(result.not_compared):
        side = Table(title="Not compared (not ok on a side)", title_justify="left")
        for h in ("trial", "base", "new", "reason"):
            side.add_column(h, overflow="fold")
        for _, r in result.not_compared.iterrows():
            side.add_row(r["trial"], r["base_status"], r["new_status"], _reason(r))
        console.print(side)
    for title, frame in (("Only in BASE", result.only_base), ("Only in NEW", result.only_new)):
        if len(frame):
            side = Table(title=title, title_justify="left")
            side.add_column("trial", overflow="fold")
            side.add_column("status")
            for _, r in frame.iterrows():
                side.add_row(r["trial"], str(r["status"]))
            console.print(side)
    if result.axis_notes:
        console.print("Why some trials did not match:", markup=False)
        for note in result.axis_notes:
            console.print(f"  - {note}", markup=False)
    return buf.getvalue()


# ----------------------------------------------------------------------------- CLI


def build_parser() -> OneLineArgumentParser:
    p = OneLineArgumentParser(
        prog="python -m runner.compare",
        description="Compare two sweeps (or result trees, files, globs) trial by trial.")
    p.add_argument("base", metavar="BASE",
                   help="baseline results: sweep dir, .parquet, results root or glob")
    p.add_argument("new", metavar="NEW", help="new results, same forms as BASE")
    p.add_argument("--filter", action="append", default=[], metavar="AXIS=VALUE",
                   help="keep trials with AXIS=VALUE[,VALUE]; repeat to AND (op=matmul, impl=x)")
    p.add_argument("--ignore-axis", action="append", default=[], metavar="AXIS",
                   help="leave AXIS out of the join (e.g. device_requested, or a param "
                        "that only one side has)")
    p.add_argument("--format", choices=("table", "csv", "markdown"), default="table")
    p.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--threshold", type=float, default=3.0, metavar="PCT",
                   help="smallest change in percent called faster/slower (default 3)")
    p.add_argument("--time", choices=TIME_CHOICES, default="auto",
                   help="which time decides: auto = the device time (gpu_time) where both "
                        "rows have one, else the loop time; gpu = device time only; loop = "
                        "the loop time, host cost included (default auto)")
    p.add_argument("--fail-on-regression", type=float, metavar="PCT",
                   help="exit 1 if a trial is significantly slower by >= PCT percent "
                        "or fails in NEW after passing in BASE")
    p.add_argument("--n-boot", type=int, default=N_BOOT, help="bootstrap replicates (default 1000)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.n_boot < 100:
        parser.error(f"--n-boot {args.n_boot} is too few for a 95% CI; use 100 or more")
    if args.fail_on_regression is not None and args.fail_on_regression < 0:
        parser.error("--fail-on-regression PCT must be >= 0")
    try:
        base = load(args.base)
        new = load(args.new)
        result = compare(base, new, filters=args.filter, ignore=args.ignore_axis,
                         alpha=args.alpha, threshold=args.threshold / 100.0,
                         time=args.time, n_boot=args.n_boot)
    except ValueError as exc:  # includes ResultsNotFoundError and bad filters
        fail(str(exc), prog=parser.prog)
    text = render(result, args.format, base_name=args.base, new_name=args.new)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    if args.fail_on_regression is not None:
        bad = result.regressions(args.fail_on_regression)
        if bad:
            print(f"regression: {len(bad)} trial(s) slower by >= {args.fail_on_regression:g}% "
                  "or newly failing:", file=sys.stderr)
            for line in bad:
                print(f"  {line}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
