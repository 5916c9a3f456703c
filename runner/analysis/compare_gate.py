"""The regression gate of ``python -m runner.compare --fail-on-regression PCT``.

Why a gate of its own: a pass means "nothing got slower", and that is only true of the pairs
the gate could judge. A pair is ``noisy`` when a burst of other work shaped one side's samples
(``runner.analysis.significance``); its median says nothing, so it is not judged on it. A
gate that then passes without saying so reads as a full pass on fewer pairs. So the gate
counts what it judged and names every pair it did not, with the reason.

A large change on a noisy pair is still not waved through: load only ever adds time, so it
cannot make the *fastest* samples slower. The gate compares the fastest sample of each side
(the statistic ``timeit`` reports, and ``pytest-benchmark --benchmark-compare-fail min:PCT``
gates on): where even NEW's fastest sample is at least PCT slower than BASE's (and more than
the comparison's threshold), the code got slower whatever the load did, and the gate fails.
Two runs of one commit, one beside bursts of other work, keep their fastest samples close
and pass. Scalar metrics (``--metric``) have no samples: a noisy one stays not judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from runner.analysis.compare_engine import Comparison
from runner.analysis.values import fmt_time_us


@dataclass(frozen=True)
class GateOutcome:
    """What the gate judged: the failures, and the pairs it did not judge, each with why."""

    pct: float
    failed: list[str] = field(default_factory=list)
    not_judged: list[str] = field(default_factory=list)
    judged: int = 0
    pairs: int = 0
    one_side: int = 0

    def lines(self) -> list[str]:
        """The gate's report, for stderr: what it did not judge, what failed, the verdict."""
        out = []
        if self.not_judged:
            out.append(f"not judged: {len(self.not_judged)} of {self.pairs} trial(s); the gate "
                       "says nothing about them (re-run them on a quiet host, or fix them):")
            out += [f"  {line}" for line in self.not_judged]
        if self.failed:
            out.append(f"regression: {len(self.failed)} trial(s) slower by >= {self.pct:g}% "
                       "or newly failing:")
            out += [f"  {line}" for line in self.failed]
        verdict = "failed" if self.failed else "passed" if self.judged else "judged nothing"
        scope = f"on {self.judged} of {self.pairs} trial(s) found on both sides"
        rest = [f"{len(self.not_judged)} not judged"] if self.not_judged else []
        rest += [f"{self.one_side} on one side only"] if self.one_side else []
        out.append(f"gate {verdict} {scope}" + (f" ({', '.join(rest)})" if rest else ""))
        return out


def gate(result: Comparison, pct: float) -> GateOutcome:
    """Judge ``result`` against a regression of ``pct`` percent (module docstring)."""
    failed = list(result.regressions(pct))
    not_judged = []
    for _, row in result.pairs.iterrows():
        if row["verdict"] != "noisy":
            continue
        slower = fastest_change_pct(row)
        if slower is not None and slower >= max(pct, result.threshold * 100.0):
            failed.append(f"{row['trial']}: {row['change_pct']:+.1f}% and noisy, but even its "
                          f"fastest sample is {slower:+.1f}% ({fmt_time_us(row['base_fastest_us'])}"
                          f" -> {fmt_time_us(row['new_fastest_us'])}): load cannot explain "
                          f"that ({row['note']})")
        else:
            not_judged.append(f"{row['trial']}: noisy, {row['change_pct']:+.1f}% by the "
                              f"medians ({row['note']})")
    for _, row in result.not_compared.iterrows():
        if not (row["base_status"] == "ok" and row["new_status"] in ("error", "oom")):
            not_judged.append(f"{row['trial']}: not compared, {row['base_status']} in BASE "
                              f"and {row['new_status']} in NEW ({_first_reason(row)})")
    pairs = len(result.pairs) + len(result.not_compared)
    return GateOutcome(pct, failed, not_judged, judged=pairs - len(not_judged), pairs=pairs,
                       one_side=len(result.only_base) + len(result.only_new))


def fastest_change_pct(row: pd.Series) -> float | None:
    """``(new_fastest / base_fastest - 1) * 100`` of a pair, or None without raw samples."""
    base, new = row.get("base_fastest_us"), row.get("new_fastest_us")
    try:
        base, new = float(base), float(new)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(base) and math.isfinite(new) and base > 0 and new > 0):
        return None
    return (new / base - 1.0) * 100.0


def _first_reason(row: pd.Series) -> str:
    for key in ("new_reason", "base_reason"):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().splitlines()[0][:120]
    return "no reason recorded"
