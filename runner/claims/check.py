"""Claims as a gate: judge results, print a table, exit non-zero when a claim failed.

* ``python -m runner experiment=X check=true`` runs the sweep and, once its results are merged,
  checks them (``runner.execution.callbacks``);
* ``python -m runner.check RESULT [RESULT ...]`` checks saved results.

Exit status: 0 when every claim held or could not be measured, 1 when one did not hold or
errored, 2 for bad arguments or malformed claims. A claim that is *not measured* does not fail:
a GPU experiment checked on a CPU-only machine measures nothing, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from runner.claims.engine import ERROR, FAILING, HELD, NOT_HELD, Verdict, judge
from runner.claims.results import CONF_DIR, Results, add_results_arguments, load_results
from runner.claims.spec import ClaimSpecError

PROG = "python -m runner.check"
EXIT_FAILED = 1

STYLE = {HELD: "green", NOT_HELD: "bold red", ERROR: "bold red"}


def check(results: Results, conf_dir: Path = CONF_DIR, prefer: str = "conf",
          trust: bool = False) -> list[tuple[str, Verdict]]:
    """Every experiment's verdicts, as ``(experiment, verdict)`` pairs. Claims come from the
    experiment configs under ``conf_dir``; a results file never names code that runs
    (``runner.claims.results``)."""
    out = []
    for name in results.experiments():
        claims = results.expectations(name, conf_dir, prefer, trust).claims
        out += [(name, verdict) for verdict in judge(claims, results.of(name))]
    return out


def print_table(verdicts: Sequence[tuple[str, Verdict]]) -> None:
    """claim | measured | criterion | verdict, on stdout (the summary table's stream)."""
    from rich.table import Table

    from runner import console

    if not verdicts:
        console.stderr.print("check: these results state no claims (expect: in the "
                             "experiment's YAML)")
        return
    table = Table(title="claims", show_lines=True)
    for column in ("experiment", "claim", "measured", "criterion", "verdict"):
        table.add_column(column, overflow="fold")
    for name, v in verdicts:
        style = STYLE.get(v.status, "yellow")
        table.add_row(name, v.claim, v.measured, v.criterion or "-",
                      f"[{style}]{v.status}[/{style}]")
    console.stdout.print(table)
    failed = [v for _, v in verdicts if v.status in FAILING]
    console.stderr.print(f"check: {len(verdicts)} claims, {len(failed)} failed"
                         + (" (did not hold or error)" if failed else ""), highlight=False)


def exit_status(verdicts: Sequence[tuple[str, Verdict]]) -> int:
    return EXIT_FAILED if any(v.status in FAILING for _, v in verdicts) else 0


def check_sweep(merged: Path) -> int:
    """For ``check=true``: judge a merged sweep file, print the table, return the exit status."""
    # the run that just wrote ``merged`` judges it by the claims it composed from its own
    # configs (stored in the file by this process), --config-dir experiments included
    verdicts = check(load_results([merged]), prefer="results", trust=True)
    print_table(verdicts)
    return exit_status(verdicts)


def main(argv: Sequence[str] | None = None) -> int:
    from runner.cli import OneLineArgumentParser, fail
    from runner.storage.load import ResultsNotFoundError

    parser = OneLineArgumentParser(
        prog=PROG, description="Judge the claims (expect:) of saved results; exit 1 when one "
                               "did not hold or errored.")
    add_results_arguments(parser)
    args = parser.parse_args(argv)
    try:
        verdicts = check(load_results(args.results), Path(args.conf_dir), args.claims_from)
    except (ResultsNotFoundError, ClaimSpecError) as exc:
        fail(str(exc), prog=PROG)
    print_table(verdicts)
    return exit_status(verdicts)
