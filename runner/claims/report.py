"""The experiments report (``docs/experiments.md``): each experiment's claims judged on its
results, its declared tables, and every trial.

``python -m runner.claims.report RESULT [RESULT ...] [--out docs/experiments.md] [--banner TEXT]``

Each RESULT is a merged result file, a sweep directory or a results root. The description of
each experiment is the typed keys of ``conf/experiment/<name>.yaml`` (``title``, ``question``,
``expected``, ``why``, ``source``); its verdicts come from the claims engine
(``runner.claims.engine``), each naming the time it read, and its tables from its
``pivots:``. Nothing is typed by hand.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from runner.analysis.selection import ok_rows, select
from runner.analysis.values import markdown_table
from runner.claims.engine import (
    ERROR,
    HELD,
    NOT_HELD,
    NOT_MEASURED,
    judge,
    metric_for,
    tally,
    time_words,
)
from runner.claims.results import (
    CONF_DIR,
    Expectations,
    Results,
    add_results_arguments,
    load_results,
)
from runner.claims.spec import TIME_METRICS, ClaimSpecError, Time
from runner.claims.tables import environment_line, not_run_table, pivot_table, results_table

PROG = "python -m runner.claims.report"

#: The lessons in the order they are taught; other experiments follow, sorted.
LESSON_ORDER: tuple[str, ...] = (
    "dtype_cliff", "tensor_core_alignment", "cuda_graphs", "streams", "copy_compute_overlap",
    "compile_fusion", "compile_recompilation", "batching", "inplace_memory", "memory_layout",
    "transfers", "caching_allocator", "cpu_threads", "precision", "cpu_vs_gpu",
    "graphed_training_step",
)

#: The description keys (``runner.config.expect.DESCRIPTION_KEYS``) as the report heads them.
FIELDS = {"question": "Question", "expected": "Expected", "why": "Why", "source": "Source"}


def description(path: Path) -> dict[str, str]:
    """The typed description keys of an experiment YAML (``title``, ``question``,
    ``expected``, ``why``, ``source``); empty when the file is missing."""
    if not path.is_file():
        return {}
    node = OmegaConf.load(path)
    return {key: " ".join(str(node.get(key)).split()) for key in ("title", *FIELDS)
            if isinstance(node.get(key), str) and node.get(key).strip()}


def experiment_section(name: str, df: pd.DataFrame, expectations: Expectations,
                       conf_dir: Path = CONF_DIR) -> str:
    desc = description(conf_dir / "experiment" / f"{name}.yaml")
    out = [f"## {name}", ""]
    if desc.get("title"):
        out += [f"*{desc['title']}*", ""]
    out += [f"**{label}.** {desc[key][:1].upper()}{desc[key][1:]}\n"
            for key, label in FIELDS.items() if desc.get(key)]
    out += [f"Config: `conf/experiment/{name}.yaml`.", ""]
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
            metric = metric_for(pivot, select(ok_rows(df), pivot.where))
            out += [f"**{pivot.title}** ({time_words(metric, pivot)}).", "", table, ""]
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
           conf_dir: Path = CONF_DIR, prefer: str = "conf",
           since: tuple | None = None) -> str:
    """The whole report as Markdown; ``since`` is ``(label, Results[, path])`` of older
    results, for the closing note of changed verdicts."""
    out = ["# Experiments: what the tutorials claim, and what we measured", "",
           f"<!-- Generated by `{PROG}` from result files; do not edit by hand: re-run it. -->",
           ""]
    if banner:
        out += [f"> **{banner}**", ""]
    out += _how_to_read(_command(sources, prefer, since))
    names = experiment_order(results.experiments())
    sections, counts = [], {}
    for name in names:
        rows, expectations = results.of(name), results.expectations(name, conf_dir, prefer)
        counts[name] = [*tally(judge(expectations.claims, rows)).values(), len(rows)]
        sections.append(experiment_section(name, rows, expectations, conf_dir))
    out += [_overview(counts) if names else "_No results were given._", "", *sections]
    if since is not None:
        label, before = since[:2]
        out += [f"## What changed since the {label} data", "",
                "Each claim above judged on the older results too (by the same claims); "
                "the verdicts that differ:", "",
                changes_since(results, before, label, conf_dir, prefer), ""]
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([*out, f"<sub>Generated {generated} by `runner/claims/report.py`.</sub>",
                      ""])


def _command(sources: Sequence[str], prefer: str, since: tuple | None) -> str:
    """The arguments that regenerate this report, as the report shows them."""
    shown = " ".join(_display_path(s) for s in sources) or "RESULT.parquet ..."
    shown += " --claims-from conf" if prefer == "conf" else ""
    return shown + (f" --since {_display_path(since[2])}"
                    if since is not None and len(since) > 2 else "")


def _how_to_read(command: str) -> list[str]:
    """The report's opening: how to regenerate it, how a verdict is decided, which time."""
    return [
        "Each section below is one `conf/experiment/*.yaml`: the question it asks, what the "
        "source tutorial claimed, the verdict computed from the data by the claims in its "
        "`expect:`, its tables (`pivots:`), and every trial. Regenerate with:", "",
        "```", f"python -m runner.claims.report {command} --out docs/experiments.md", "```", "",
        "**How a verdict is decided.** A claimed speedup of X× *held* if the measured speedup "
        "is at least 1 + (X − 1)/2, i.e. at least half of the claimed gain "
        "(`half_of_claimed_gain`); a claim that something buys nothing held if the measured "
        "speedup is below 1.1× (`below: 1.1`); other claims state their criterion. GPU claims "
        "use only the CUDA rows, CPU claims only the CPU rows; a claim without the rows it "
        "needs is *not measured*.", "",
        "**Which time.** Every verdict names the time it read. *Device time per op* is the "
        "GPU's own time (`gpu_time_per_op_us`): what the kernels took, whatever the host did; "
        "*loop time per op* (`time_per_op_us`) is what a loop of calls on this host paid, "
        "launch cost included. Claims about what the GPU does (precision, alignment, layout, "
        "overlap on streams) read the device time; claims about launch cost (CUDA graphs, "
        "batching, the host's side of streams) read the loop time; CPU rows have only the "
        "loop time. \"(default)\" marks a claim that left the choice to that rule.", "",
        "The tutorials' numbers come from a T4 (*CUDA operations in PyTorch*, *PyTorch CUDA "
        "101*) and an older 16-SM GPU (*PyTorch handling of GPU devices*), so a claim that did "
        "not hold on a newer GPU is a finding, not an error: each experiment's *Why* says what "
        "the H200 does differently. How to write claims: `docs/claims.md`.", "",
    ]


def _overview(counts: dict[str, list[int]]) -> str:
    """One line per experiment: its verdicts tallied (held, did not hold, not measured,
    error: only when a claim errored) and its trials."""
    keep = [i for i in range(5) if i != 3 or any(c[3] for c in counts.values())]
    headers = ["held", "did not hold", "not measured", "error", "trials"]
    return markdown_table(["experiment"] + [headers[i] for i in keep],
                          [[f"[{name}](#{name})"] + [c[i] for i in keep]
                           for name, c in counts.items()])


def changes_since(results: Results, before: Results, label: str, conf_dir: Path = CONF_DIR,
                  prefer: str = "results") -> str:
    """The closing note: each verdict that differs between ``before`` (an older run of the
    same experiments) and ``results``, both judged by today's claims, and why. Rows older than
    the device time are judged on the loop time (the only one they have), so a claim that now
    reads the device time says so."""
    rows = []
    for name in experiment_order(results.experiments()):
        old = before.of(name) if name in before.experiments() else pd.DataFrame()
        if old.empty:
            continue
        claims = results.expectations(name, conf_dir, prefer).claims
        device = TIME_METRICS[Time.device]
        has_device = device in old and old[device].notna().any()
        then = judge([c if has_device or c.time != Time.device
                      else dataclasses.replace(c, time=None) for c in claims], old)
        for was, now in zip(then, judge(claims, results.of(name)), strict=True):
            if was.status == now.status:
                continue
            if was.time != now.time or (not has_device and "device time" in now.time):
                why = (f"now read on the device time ({now.time}); the {label} rows had "
                       "only the loop time")
            else:
                why = f"same time ({now.time}), a new measurement: see the experiment's Why"
            rows.append([f"[{name}](#{name})", now.claim,
                         f"{was.status}: {was.measured}", f"{now.status}: {now.measured}",
                         why])
    if not rows:
        return f"No verdict changed since the {label} data."
    return markdown_table(["experiment", "claim", f"{label}", "now", "why"], rows)


def _since_label(path: str) -> str:
    """The date in an older result file's name (``...-2026-11-21.parquet``), else its name."""
    import re

    found = re.search(r"\d{4}-\d{2}-\d{2}", Path(path).name)
    return found.group(0) if found else Path(path).name


def _display_path(path: str) -> str:
    """A path inside the working directory relative to it; anything else by its name only
    (a GPU run's files arrive in some temporary folder)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return Path(path).name


def main(argv: Sequence[str] | None = None) -> int:
    from runner.cli import OneLineArgumentParser, fail, program
    from runner.storage.result_files import ResultsNotFoundError

    parser = OneLineArgumentParser(
        prog=program("runner.claims.report"),
        description="Write the experiments report (docs/experiments.md).")
    add_results_arguments(parser)
    parser.add_argument("--out", help="write the Markdown here (default: stdout)")
    parser.add_argument("--banner", default="",
                        help="a note printed at the top, e.g. that the numbers are placeholders")
    parser.add_argument("--since", metavar="OLD_RESULT",
                        help="close with the verdicts that changed since these older results")
    args = parser.parse_args(argv)
    try:
        results = load_results(args.results)
        since = None if not args.since else (_since_label(args.since),
                                             load_results([args.since]), args.since)
        text = render(results, banner=args.banner, sources=args.results,
                      conf_dir=Path(args.conf_dir), prefer=args.claims_from, since=since)
    except (ResultsNotFoundError, ClaimSpecError) as exc:
        fail(str(exc), prog=parser.prog)
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
