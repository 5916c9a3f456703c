"""Judging claims on results: select rows, reduce them to a number, compare, say why.

One engine for every experiment: a claim (``runner.claims.spec.Claim``) is data, and
:func:`judge` turns it into a :class:`Verdict` with the measured number and the criterion in
words. The statuses:

* **held** / **did not hold**: the measured value met the claim's criterion, or did not;
* **not measured**: the rows the claim needs are not in the results (a GPU claim on a CPU run,
  a size a smoke run clamped away, a column an older file lacks);
* **error**: the claim itself failed (an exception in a ``_target_`` function, a selector that
  matched several rows under ``aggregate: one``), with the exception. Never "not measured";
* **measured**: a number reported without a criterion (a ``_target_`` without a comparison);
* **not judged (smoke)**: the rows come from a ``smoke=true`` run, whose numbers mean nothing
  (``runner.claims.check`` gives this status before any claim reads them).

"Half of the claimed gain": a claimed speedup of X× held if the measured one is at least
``1 + (X − 1) / 2``, so a claim from slower hardware is judged by its direction and rough size,
not by its exact number.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from runner.analysis.selection import ok_rows, select
from runner.analysis.values import fmt_num, fmt_ratio, fmt_time_us, is_missing
from runner.claims.spec import TIME_METRICS, Aggregate, Claim, Pivot, Time, resolve

HELD, NOT_HELD, NOT_MEASURED, MEASURED, ERROR = (
    "held", "did not hold", "not measured", "measured", "error")
#: A claim on rows of a ``smoke=true`` run: their numbers only show that the configs run, so
#: no claim is judged on them (``runner.claims.check``).
SMOKE = "not judged (smoke)"
#: Statuses that make ``check=true`` and ``python -m runner.check`` exit non-zero.
FAILING = (NOT_HELD, ERROR)
MIB = 1 << 20


@dataclass
class Verdict:
    """A judged claim: the sentence, the status, the number(s) measured and the criterion."""

    claim: str
    status: str
    measured: str = ""
    criterion: str = ""
    value: float | None = None
    source: str = ""
    time: str = ""

    def line(self) -> str:
        parts = [f"- **{self.status}**: {self.claim.rstrip('.')}."]
        if self.measured:
            parts.append(f"Measured: {self.measured}.")
        if self.criterion:
            parts.append(f"*Criterion: {self.criterion}.*")
        if self.time:
            parts.append(f"*Time: {self.time}.*")
        return " ".join(parts)


@dataclass
class Measurement:
    """What a ``_target_`` function measured: the value the comparison judges, and its text.
    ``ratio`` formats the value and the thresholds as ``1.5x``; ``reads`` names what it read
    when that is not the claim's time (the verdict's *time* says so)."""

    value: float | None
    text: str
    ratio: bool = True
    reads: str = ""


class ClaimDataError(ValueError):
    """The data cannot answer the claim as written (e.g. ``aggregate: one`` on several rows)."""


# ---------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------

def fmt_metric(metric: str, value: Any) -> str:
    """``value`` of column ``metric`` in its unit: times, bytes as MiB, GB/s, TFLOP/s."""
    if is_missing(value):
        return "-"
    v = float(value)
    if metric.endswith("_us"):
        return fmt_time_us(v)
    if metric.endswith("_bytes") or "_bytes_" in metric:
        return f"{fmt_num(v / MIB)} MiB"
    if metric.endswith("_s"):
        return f"{fmt_num(v)} s"
    units = {"gbps": " GB/s", "tflops": " TFLOP/s"}
    return fmt_num(int(v) if v.is_integer() else v) + units.get(metric, "")


def aggregate(rows: pd.DataFrame, metric: str, how: Aggregate = Aggregate.median) -> float | None:
    """``metric`` over ``rows`` reduced to one number, or None without data.
    ``time_per_op_us`` falls back to ``time_median_us`` (files older than that column)."""
    if metric == "time_per_op_us" and _values(rows, metric).empty:
        metric = "time_median_us"
    values = _values(rows, metric)
    if how == Aggregate.one and len(values) > 1:
        raise ClaimDataError(f"the selector matched {len(values)} rows with a {metric}; "
                             "'aggregate: one' requires exactly one (narrow the selector, e.g. "
                             "by shape or dtype, or aggregate them: median, min, max, mean, sum)")
    if values.empty:
        return None
    how = Aggregate.median if how == Aggregate.one else how
    return float(getattr(values, how.value)())


def _values(rows: pd.DataFrame, metric: str) -> pd.Series:
    if rows.empty or metric not in rows:
        return pd.Series([], dtype=float)
    return pd.to_numeric(rows[metric], errors="coerce").dropna()


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    if not (math.isfinite(numerator) and math.isfinite(denominator)):
        return None
    return numerator / denominator


# ---------------------------------------------------------------------------------------
# Which time
# ---------------------------------------------------------------------------------------

def metric_for(spec: Claim | Pivot, rows: pd.DataFrame) -> str:
    """The column ``spec`` reads on ``rows`` (its selected ok rows): its ``metric``, the
    column of its ``time``, or by default the device time when every row is a CUDA row with
    one, else the loop time (``runner.claims.spec``, "Which time")."""
    if spec.metric is not None:
        return spec.metric
    if spec.time is not None:
        return TIME_METRICS[Time(spec.time)]
    device = TIME_METRICS[Time.device]
    if rows.empty or "device" not in rows or device not in rows:
        return TIME_METRICS[Time.loop]
    on_cuda = rows["device"].astype(str).str.startswith("cuda").all()
    has_device_time = pd.to_numeric(rows[device], errors="coerce").notna().all()
    return device if on_cuda and has_device_time else TIME_METRICS[Time.loop]


def time_words(metric: str, spec: Claim | Pivot | None = None) -> str:
    """Which time ``metric`` is, in words, as a verdict names it; "(default)" when the spec
    left the choice to :func:`metric_for`."""
    words = {TIME_METRICS[Time.device]: "device time per op",
             TIME_METRICS[Time.loop]: "loop time per op",
             "tflops": "TFLOP/s (at the device time where a row has one)",
             "gbps": "GB/s (at the device time where a row has one)"}.get(metric)
    if words is None:
        return metric
    chosen = spec is None or spec.time is not None or spec.metric is not None
    return words if chosen or metric not in TIME_METRICS.values() else f"{words} (default)"


# ---------------------------------------------------------------------------------------
# Measuring a declared claim
# ---------------------------------------------------------------------------------------

def measure(claim: Claim, df: pd.DataFrame) -> Measurement:
    """The claim's value on ``df``'s ok rows (see ``runner.claims.spec``)."""
    ok = ok_rows(df)
    if claim.metric is None:
        claim = dataclasses.replace(claim, metric=metric_for(claim, select(ok, claim.where)))
    items = claim.each if claim.each is not None else [{}]
    values, texts = [], []
    for item in items:
        where = {**claim.where, **item.get("where", {})}
        numerator = {**(claim.numerator or {}), **item.get("numerator", {})}
        denominator = {**(claim.denominator or {}), **item.get("denominator", {})}
        if numerator or denominator:
            top = aggregate(select(ok, {**where, **numerator}), claim.metric, claim.aggregate)
            bottom = aggregate(select(ok, {**where, **denominator}), claim.metric,
                               claim.aggregate)
            value = ratio(top, bottom)
            text = fmt_ratio(value)
            if value is not None and claim.each is None:
                text += (f" ({fmt_metric(claim.metric, top)} / "
                         f"{fmt_metric(claim.metric, bottom)})")
        else:
            value = aggregate(select(ok, where), claim.metric, claim.aggregate)
            text = fmt_metric(claim.metric, value)
        values.append(value)
        texts.append(f"{item['label']} {text}" if "label" in item else text)
    label = claim.label or claim.metric
    if any(v is None for v in values):
        missing = [t for t, v in zip(texts, values, strict=True) if v is None]
        return Measurement(None, f"{label}: no rows" + (
            f" for {', '.join(missing)}" if claim.each is not None else ""), claim.is_ratio)
    if claim.each is None:
        return Measurement(values[0], f"{label} = {texts[0]}", claim.is_ratio)
    combined = max(values) if claim.combine.value == "max" else min(values)
    shown = fmt_ratio(combined) if claim.is_ratio else fmt_metric(claim.metric, combined)
    return Measurement(combined, f"{label} = {shown} ({claim.combine.value} of: "
                                 f"{', '.join(texts)})", claim.is_ratio)


# ---------------------------------------------------------------------------------------
# Comparing
# ---------------------------------------------------------------------------------------

def criterion(claim: Claim, is_ratio: bool) -> tuple[str, Any]:
    """The claim's criterion in words, and a predicate on the measured value."""
    def text(v: float) -> str:
        return fmt_ratio(v) if is_ratio else fmt_metric(claim.metric, v)

    if claim.half_of_claimed_gain is not None:
        claimed = claim.half_of_claimed_gain
        need = 1 + (claimed - 1) / 2
        return (f"held if ≥ {fmt_ratio(need)} (half of the claimed {fmt_ratio(claimed)} gain)",
                lambda v: v >= need)
    if claim.at_least is not None:
        return f"held if ≥ {text(claim.at_least)}", lambda v: v >= claim.at_least
    if claim.at_most is not None:
        return f"held if ≤ {text(claim.at_most)}", lambda v: v <= claim.at_most
    if claim.below is not None:
        return f"held if < {text(claim.below)}", lambda v: v < claim.below
    if claim.within is not None:
        low, high = claim.within
        words = f"= {text(low)}" if low == high else f"within {text(low)} – {text(high)}"
        return f"held if {words}", lambda v: low <= v <= high
    return "", None


def judge_one(claim: Claim, df: pd.DataFrame) -> Verdict:
    """One claim's verdict on ``df`` (the experiment's rows). Raises on a code error."""
    metric = metric_for(claim, select(ok_rows(df), claim.where))
    time = time_words(metric, claim)
    claim = dataclasses.replace(claim, metric=metric, time=None)
    if claim._target_ is not None:
        out = resolve(claim._target_)(df, claim)
        if isinstance(out, Verdict):
            out.source = out.source or claim.source
            out.time = out.time or time
            return out
        if not isinstance(out, Measurement):
            raise TypeError(f"{claim._target_} returned {type(out).__name__}; expected a "
                            "Measurement or a Verdict")
        measurement = out
    else:
        measurement = measure(claim, df)
    words, holds = criterion(claim, measurement.ratio)
    time = measurement.reads or time
    value = measurement.value
    if holds is None:
        status = MEASURED
    elif value is None or not math.isfinite(value):
        status = NOT_MEASURED
    else:
        status = HELD if holds(value) else NOT_HELD
    return Verdict(claim.claim, status, measurement.text, words, value, claim.source, time)


def judge(claims: Sequence[Claim], df: pd.DataFrame) -> list[Verdict]:
    """Every claim's verdict; a claim that raises becomes an ``error`` verdict naming the
    exception, and the others are still judged."""
    out = []
    for claim in claims:
        try:
            out.append(judge_one(claim, df))
        except Exception as exc:  # a bug in a claim must show as one, not as missing data
            out.append(Verdict(claim.claim, ERROR, f"{type(exc).__name__}: {exc}",
                               source=claim.source))
    return out


def tally(verdicts: Sequence[Verdict]) -> dict[str, int]:
    return {s: sum(v.status == s for v in verdicts) for s in (HELD, NOT_HELD, NOT_MEASURED,
                                                              ERROR)}
