"""The trial-order gates of ``time_to_result.py``: the sweep's overrides per order, the
within-3% check per order, and every miss of every process with what its row says of it.

A miss is worth as much as its row's own account: the clock its samples ran at, the board's
temperature and averaged power under them, and whether ``sustained_flag`` warned the user.
A flagged miss is a number the user was told not to trust; an unflagged one is a defect.
"""

from __future__ import annotations

from typing import Any

DTYPES = ("bf16", "fp16", "fp32", "tf32")
#: A device time this far from its reference (%) is a miss.
MISS_PCT = 3.0


def pct(value: float, reference: float) -> float:
    return (value / reference - 1) * 100


def case_of(row: Any) -> tuple[int, str]:
    return int(row["shape_str"].split("x")[0]), row["dtype"]


def order_args(sweep: list[str], order: str, sizes: tuple[int, ...]) -> list[str]:
    """The sweep's overrides for one trial order: heat (the default), plan, or the plan
    reversed (sizes and dtypes listed the other way round)."""
    if order == "heat":
        return sweep
    if order == "plan":
        return [*sweep, "trial_order=plan"]
    if order == "reverse":
        shapes = "[" + ",".join(f"[{s},{s},{s}]" for s in reversed(sizes)) + "]"
        return [f"shape={shapes}" if arg.startswith("shape=") else
                f"dtype=[{','.join(reversed(DTYPES))}]" if arg.startswith("dtype=") else arg
                for arg in sweep] + ["trial_order=plan"]
    raise SystemExit(f"--orders: unknown order {order!r}: expected heat, plan or reverse")


def order_checks(by_order: dict[str, list], refs: dict) -> list[tuple[str, bool, str]]:
    """Per trial order: every trial of every process within 3% of the reference, and the
    misses named."""
    checks = []
    for order, runs in by_order.items():
        deltas = [(f"{row['dtype']} {row['shape_str'].split('x')[0]}³",
                   pct(row["gpu_time_us"], refs[case_of(row)]["ref_us"]))
                  for frame, _, _ in runs for _, row in frame.iterrows()]
        misses = [f"{name} {d:+.1f}%" for name, d in deltas if abs(d) > MISS_PCT]
        checks.append((f"order {order}: every trial within 3% of the reference", not misses,
                       f"{len(deltas) - len(misses)} of {len(deltas)}, max |Δ| "
                       f"{max(abs(d) for _, d in deltas):.2f}%; walls "
                       f"{', '.join(f'{w:.1f}' for _, w, _ in runs)} s"
                       + (f"; misses: {', '.join(misses)}" if misses else "")))
    return checks


def print_misses(by_order: dict[str, list], refs: dict) -> tuple[str, bool, str]:
    """Print every miss of every process with its row's account, and return the check that
    no miss went unflagged (with how many right rows were flagged: a flag's false alarms)."""
    print("\n## Misses, every process (beyond 3% of the reference)\n")
    print("| order | process | trial | Δ | heat before | MHz | °C | power share | flag |")
    print("|---|---:|---|---:|---|---:|---:|---:|---|")
    unflagged, false_alarms, right = [], 0, 0
    for order, runs in by_order.items():
        for process, (frame, _, _) in enumerate(runs, 1):
            for _, row in frame.iterrows():
                delta = pct(row["gpu_time_us"], refs[case_of(row)]["ref_us"])
                flag = row.get("sustained_flag")
                flag = flag if isinstance(flag, str) else None  # pandas reads a null as NaN
                if abs(delta) <= MISS_PCT:
                    right, false_alarms = right + 1, false_alarms + bool(flag)
                    continue
                name = f"{row['dtype']} {row['shape_str'].split('x')[0]}³"
                if not flag:
                    unflagged.append(f"{order}/{process} {name} {delta:+.1f}%")
                print(f"| {order} | {process} | {name} | {delta:+.2f}% | "
                      f"{row.get('heat_before')} | {row.get('sm_clock_mhz_samples_median')} | "
                      f"{row.get('temperature_c_timed')} | {row.get('power_share_samples')} | "
                      f"{(flag or '')[:90]} |")
    return ("every miss flagged (false alarms: right rows flagged)", not unflagged,
            f"{len(unflagged)} unflagged: {', '.join(unflagged) or 'none'}; "
            f"{false_alarms} of {right} right rows flagged")
