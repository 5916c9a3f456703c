"""The experiments report (``docs/experiments.md``): each experiment's claims judged on its
results, its declared tables, and every trial.

``python -m runner.claims.report RESULT [RESULT ...] [--out docs/experiments.md] [--banner TEXT]``

Each RESULT is a merged result file, a sweep directory or a results root. The description of
each experiment is the comment block that opens ``conf/experiment/<name>.yaml`` (a title line,
then Question / Expect / Why / Source); its verdicts come from the claims engine
(``runner.claims.engine``) and its tables from its ``pivots:``. Nothing is typed by hand.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from runner.analysis.values import markdown_table
from runner.claims.engine import ERROR, HELD, NOT_HELD, NOT_MEASURED, judge, tally
from runner.claims.results import (
    CONF_DIR,
    Expectations,
    Results,
    add_results_arguments,
    load_results,
)
from runner.claims.spec import ClaimSpecError
from runner.claims.tables import environment_line, not_run_table, pivot_table, results_table

PROG = "python -m runner.claims.report"

#: The lessons in the order of the experiments issue; other experiments follow, sorted.
LESSON_ORDER: tuple[str, ...] = (
    "dtype_cliff", "tensor_core_alignment", "cuda_graphs", "streams", "copy_compute_overlap",
    "compile_fusion", "compile_recompilation", "batching", "inplace_memory", "memory_layout",
    "transfers", "caching_allocator", "cpu_threads", "precision", "cpu_vs_gpu",
    "graphed_training_step",
)

FIELDS = ("Question", "Expect", "Why", "Source")


@dataclass
class Description:
    title: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    notes: str = ""


def parse_description(path: Path) -> Description:
    """The opening comment block of an experiment YAML: a title line, then ``Question:``,
    ``Expect:``, ``Why:`` and ``Source:`` fields (continuation lines indented), then free
    notes. ``Expect (H200):`` keeps its qualifier, ``Sources:`` counts as ``Source:``."""
    desc = Description()
    if not path.is_file():
        return desc
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.startswith("#"):
            break
        if not raw[1:].strip().startswith("@package"):
            lines.append(raw[2:] if raw.startswith("# ") else raw[1:])
    current: str | None = None
    notes: list[str] = []
    for line in lines:
        match = re.match(r"(\w+?)s?( \([^)]*\))?:\s*(.*)", line)
        if match and match.group(1) in FIELDS:
            current = match.group(1)
            qualifier = (match.group(2) or "").strip()
            desc.fields[current] = " ".join(p for p in (qualifier, match.group(3).strip()) if p)
        elif not desc.title and current is None:
            desc.title = line.strip()
        elif current is not None and line.startswith((" ", "\t")) and line.strip():
            desc.fields[current] += " " + line.strip()
        else:
            current = None
            if line.strip():
                notes.append(line.strip())
    desc.notes = " ".join(notes)
    return desc


def experiment_section(name: str, df: pd.DataFrame, expectations: Expectations,
                       conf_dir: Path = CONF_DIR) -> str:
    desc = parse_description(conf_dir / "experiment" / f"{name}.yaml")
    out = [f"## {name}", ""]
    if desc.title:
        out += [f"*{desc.title}*", ""]
    for key, label in zip(FIELDS, ("Question", "Expected", "Why", "Source"), strict=True):
        if desc.fields.get(key):
            out += [f"**{label}.** {desc.fields[key]}", ""]
    if desc.notes:
        out += [f"**Setup.** {desc.notes} Config: `conf/experiment/{name}.yaml`.", ""]
    counts = df["status"].astype(str).value_counts().to_dict() if "status" in df else {}
    trials = f"{len(df)} trial{'s' if len(df) != 1 else ''}"
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    out += [f"**Measured on** {environment_line(df)} {trials}: {statuses}.", ""]
    verdicts = judge(expectations.claims, df)
    if verdicts:
        out += [f"**Verdict:** {_tally_text(verdicts)}.", ""]
        out += [v.line() for v in verdicts] + [""]
    else:
        out += ["**Verdict:** this experiment states no claim (`expect:`).", ""]
    for pivot in expectations.pivots:
        table = pivot_table(df, pivot)
        if table:
            out += [f"**{pivot.title}.**", "", table, ""]
    metrics = [c.metric for c in expectations.claims] + [p.metric for p in expectations.pivots]
    out += [results_table(df, metrics), ""]
    not_run = not_run_table(df)
    if not_run:
        out += ["Trials that did not run:", "", not_run, ""]
    return "\n".join(out)


def _tally_text(verdicts: Sequence) -> str:
    counts = tally(verdicts)
    text = (f"{counts[HELD]} held, {counts[NOT_HELD]} did not hold, "
            f"{counts[NOT_MEASURED]} not measured")
    return text + (f", {counts[ERROR]} error" if counts[ERROR] else "")


def experiment_order(names: Iterable[str]) -> list[str]:
    names = list(dict.fromkeys(names))
    known = [n for n in LESSON_ORDER if n in names]
    return known + sorted(n for n in names if n not in LESSON_ORDER)


def render(results: Results, *, banner: str = "", sources: Sequence[str] = (),
           conf_dir: Path = CONF_DIR, prefer: str = "conf") -> str:
    """The whole report as Markdown."""
    out = ["# Experiments: what the seeds claim, and what we measured", "",
           f"<!-- Generated by `{PROG}` from result files; do not edit by hand: re-run it. -->",
           ""]
    if banner:
        out += [f"> **{banner}**", ""]
    names = experiment_order(results.experiments())
    shown = " ".join(_display_path(s) for s in sources) or "RESULT.parquet ..."
    out += [
        "Each section below is one `conf/experiment/*.yaml`: the question it asks, what the "
        "seed tutorial claimed, the verdict computed from the data by the claims in its "
        "`expect:`, its tables (`pivots:`), and every trial. Regenerate with:", "",
        "```", f"python -m runner.claims.report {shown} --out docs/experiments.md", "```", "",
        "**How a verdict is decided.** A claimed speedup of X× *held* if the measured speedup "
        "is at least 1 + (X − 1)/2, i.e. at least half of the claimed gain "
        "(`half_of_claimed_gain`); a claim that something buys nothing held if the measured "
        "speedup is below 1.1× (`below: 1.1`); other claims state their criterion. GPU claims "
        "use only the CUDA rows, CPU claims only the CPU rows; a claim without the rows it "
        "needs is *not measured*. The seeds' numbers come from a T4 (seeds 000, 001) and an "
        "older 16-SM GPU (seed 004), so a claim that did not hold on a newer GPU is a finding, "
        "not an error. How to write claims: `docs/claims.md`.", "",
    ]
    sections, counts = [], {}
    for name in names:
        rows, expectations = results.of(name), results.expectations(name, conf_dir, prefer)
        counts[name] = [*tally(judge(expectations.claims, rows)).values(), len(rows)]
        sections.append(experiment_section(name, rows, expectations, conf_dir))
    if names:
        # held, did not hold, not measured, [error: only when a claim errored], trials
        keep = [i for i in range(5) if i != 3 or any(c[3] for c in counts.values())]
        headers = ["held", "did not hold", "not measured", "error", "trials"]
        out += [markdown_table(["experiment"] + [headers[i] for i in keep],
                               [[f"[{name}](#{name})"] + [c[i] for i in keep]
                                for name, c in counts.items()]), ""]
    else:
        out += ["_No results were given._", ""]
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out += sections + [f"<sub>Generated {generated} by `runner/claims/report.py`.</sub>", ""]
    return "\n".join(out)


def _display_path(path: str) -> str:
    """A path inside the working directory relative to it; anything else by its name only
    (a GPU run's files arrive in some temporary folder)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return Path(path).name


def main(argv: Sequence[str] | None = None) -> int:
    from runner.cli import OneLineArgumentParser, fail
    from runner.storage.load import ResultsNotFoundError

    parser = OneLineArgumentParser(
        prog=PROG, description="Write the experiments report (docs/experiments.md).")
    add_results_arguments(parser)
    parser.add_argument("--out", help="write the Markdown here (default: stdout)")
    parser.add_argument("--banner", default="",
                        help="a note printed at the top, e.g. that the numbers are placeholders")
    args = parser.parse_args(argv)
    try:
        results = load_results(args.results)
        text = render(results, banner=args.banner, sources=args.results,
                      conf_dir=Path(args.conf_dir), prefer=args.claims_from)
    except (ResultsNotFoundError, ClaimSpecError) as exc:
        fail(str(exc), prog=PROG)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}: {len(results.experiments())} experiments, "
              f"{len(results.rows)} trials", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
