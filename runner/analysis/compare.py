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
By default (``--time auto``) a pair is judged on its device time wherever both rows have
one, else on its loop time; the other time is shown beside it and the ``time`` column says
which decided. ``--time loop`` gates host cost on purpose. ``--metric energy_per_call_mJ``
(or another per-trial scalar, lower is better) judges that instead and ignores ``--time``.

This module is the command; the work is in three modules, one job each:
:mod:`~runner.analysis.compare_join` (matching specs, pooling repeated rows),
:mod:`~runner.analysis.compare_engine` (:func:`compare`, :class:`Comparison`: judging each
pair) and :mod:`~runner.analysis.compare_render` (:func:`render`: table, Markdown, CSV); its
settings are a :class:`CompareOptions` (:mod:`~runner.analysis.compare_options`).
Their entry points are importable from here (``from runner.analysis.compare import render``).

Exit status: 0, or with ``--fail-on-regression PCT``: 1 when some trial got significantly
slower by at least PCT percent (or failed in NEW after passing in BASE, or is noisy yet even
its fastest sample is PCT slower: :mod:`~runner.analysis.compare_gate`), 3
(:data:`EXIT_NOTHING_COMPARED`) when the gate judged nothing: no trial of NEW matched one of
BASE with an ok time on both sides (the notes name the axes that differ; ``--ignore-axis``
joins across one), or every pair was noisy; 2 for bad arguments. The gate names every pair it
did not judge, and its last line says on how many it passed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from runner.analysis.compare_engine import Comparison, compare
from runner.analysis.compare_gate import gate
from runner.analysis.compare_options import METRICS, TIME_CHOICES, CompareOptions
from runner.analysis.compare_render import render
from runner.analysis.significance import N_BOOT
from runner.cli import OneLineArgumentParser, fail, program
from runner.storage.load import load

__all__ = ["CompareOptions", "Comparison", "build_parser", "compare", "main", "render"]

EXIT_REGRESSION = 1
EXIT_NOTHING_COMPARED = 3


def build_parser() -> OneLineArgumentParser:
    p = OneLineArgumentParser(
        prog=program("runner.compare"),
        description="Compare two sweeps (or result trees, files, globs) trial by trial.")
    p.add_argument("base", metavar="BASE",
                   help="baseline results: sweep dir, .parquet, results root or glob")
    p.add_argument("new", metavar="NEW", help="new results, same forms as BASE")
    p.add_argument("--filter", action="append", default=[], metavar="AXIS=VALUE",
                   help="keep trials with AXIS=VALUE[,VALUE]; repeat to AND (op=matmul, impl=x)")
    p.add_argument("--ignore-axis", action="append", default=[], metavar="AXIS",
                   help="leave AXIS out of the join, as the table names it (shape, device, "
                        "dtype, streams, a param such as impl...): a pair's label then shows "
                        "both sides' values")
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
                   help="exit 1 if a trial is significantly slower by >= PCT percent, "
                        "fails in NEW after passing in BASE, or is noisy yet even its fastest "
                        "sample is PCT slower; exit 3 if the gate judged nothing (no trial "
                        "matched, or every pair noisy). Pairs not judged are named on stderr")
    p.add_argument("--n-boot", type=int, default=N_BOOT, help="bootstrap replicates (default 1000)")
    p.add_argument("--metric", choices=tuple(METRICS), default="time",
                   help="what decides: time (default, by --time), or a per-trial scalar, lower "
                        "is better: energy_per_call_mJ (energy=true), kernel_time_sum_us "
                        "(profile=true)...; a scalar ignores --time")
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
        result = compare(base, new, CompareOptions(
            filters=args.filter, ignore=args.ignore_axis, alpha=args.alpha,
            threshold=args.threshold / 100.0, time=args.time, n_boot=args.n_boot,
            metric=args.metric))
    except ValueError as exc:  # includes ResultsNotFoundError and bad filters
        fail(str(exc), prog=parser.prog)
    if args.metric != "time" and args.time != "auto":
        print(f"note: --time {args.time} ignored: --metric {args.metric} decides",
              file=sys.stderr)
    text = render(result, args.format, base_name=args.base, new_name=args.new)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    if args.fail_on_regression is not None:
        if result.pairs.empty and not result.regressions(args.fail_on_regression):
            counts = result.counts()
            print(f"nothing compared: no trial matched on both sides with an ok time "
                  f"({counts['only_base']} only in BASE, {counts['only_new']} only in NEW, "
                  f"{counts['not_compared']} not compared); a regression gate that judged "
                  f"nothing fails (exit {EXIT_NOTHING_COMPARED}). The notes above name the "
                  "axes that differ; --ignore-axis AXIS joins across one.", file=sys.stderr)
            return EXIT_NOTHING_COMPARED
        outcome = gate(result, args.fail_on_regression)
        for line in outcome.lines():
            print(line, file=sys.stderr)
        if outcome.failed:
            return EXIT_REGRESSION
        if not outcome.judged:
            return EXIT_NOTHING_COMPARED
    return 0


if __name__ == "__main__":
    sys.exit(main())
