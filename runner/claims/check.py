"""Claims as a gate: judge results, print a table, exit non-zero when a claim failed.

* ``python -m runner experiment=X check=true`` runs the sweep and, once its results are merged,
  checks them (``runner.execution.callbacks``);
* ``python -m runner.check RESULT [RESULT ...]`` checks saved results.

Exit status (so that CI can tell the cases apart):

* 0: every claim that could be judged held, and at least one could (a GPU claim checked on a
  CPU-only machine is *not measured*, which alone fails nothing);
* 1 (:data:`EXIT_FAILED`): a claim did not hold, or errored;
* 2: bad arguments or malformed claims;
* 3 (:data:`EXIT_NOTHING_MEASURED`): no claim could be judged: every one was *not measured*
  (a GPU claim on a CPU run), *not judged (smoke)* (rows of ``smoke=true``, whose numbers only
  show that the configs run), or the results state none. A gate that
  passes on nothing is no gate.

Several sweeps of one experiment (a results root, two sweep directories) are judged each on
its own rows, one verdict per sweep: a median pooled over a smoke run and a full run is a
number neither measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from runner.claims.engine import ERROR, FAILING, HELD, NOT_HELD, SMOKE, Verdict, judge
from runner.claims.results import (
    CONF_DIR,
    SMOKE_COLUMN,
    Results,
    add_results_arguments,
    load_results,
)
from runner.claims.spec import Claim, ClaimSpecError

EXIT_FAILED = 1
EXIT_NOTHING_MEASURED = 3

STYLE = {HELD: "green", NOT_HELD: "bold red", ERROR: "bold red"}


def check(results: Results, conf_dir: Path = CONF_DIR, prefer: str = "conf",
          trust: bool = False) -> list[tuple[str, Verdict]]:
    """Every experiment's verdicts, as ``(experiment, verdict)`` pairs; an experiment found in
    several sweeps is judged once per sweep, labelled ``experiment @ sweep``. Claims come from
    the experiment configs under ``conf_dir``; a results file never names code that runs
    (``runner.claims.results``)."""
    out = []
    for name in results.experiments():
        claims = results.expectations(name, conf_dir, prefer, trust).claims
        rows = results.of(name)
        sweeps = list(dict.fromkeys(rows["sweep_id"].astype(str))) if "sweep_id" in rows else []
        if len(sweeps) <= 1:
            out += [(name, verdict) for verdict in judge_timed(claims, rows)]
            continue
        for sweep in sweeps:
            own = rows[rows["sweep_id"].astype(str) == sweep]
            out += [(f"{name} @ {sweep}", verdict) for verdict in judge_timed(claims, own)]
    return out


def judge_timed(claims: Sequence[Claim], rows: pd.DataFrame) -> list[Verdict]:
    """The claims judged on the rows of full runs; rows of ``smoke=true`` (clamped sizes, the
    smoke timer) are set aside, and where nothing else is left every claim is *not judged
    (smoke)*: a smoke run proves that the configs run, and a claim that "held" on its
    numbers would be luck."""
    smoke = (rows[SMOKE_COLUMN].fillna(False).astype(bool) if SMOKE_COLUMN in rows
             else pd.Series(False, index=rows.index))
    if len(rows) and smoke.all():
        return [Verdict(c.claim, SMOKE, f"{len(rows)} rows, all smoke: numbers that only "
                        "show the configs run", source=c.source) for c in claims]
    return judge(claims, rows[~smoke])


def print_table(verdicts: Sequence[tuple[str, Verdict]]) -> None:
    """claim | measured | criterion | verdict, on stdout (the summary table's stream)."""
    from rich.table import Table

    from runner import console

    if not verdicts:
        console.stderr.print("check: nothing measured: these results state no claims (expect: "
                             f"in the experiment's YAML); exit {EXIT_NOTHING_MEASURED}")
        return
    table = Table(title="claims", show_lines=True)
    for column in ("experiment", "claim", "measured", "criterion", "time", "verdict"):
        table.add_column(column, overflow="fold")
    for name, v in verdicts:
        style = STYLE.get(v.status, "yellow")
        table.add_row(name, v.claim, v.measured, v.criterion or "-", v.time or "-",
                      f"[{style}]{v.status}[/{style}]")
    console.stdout.print(table)
    failed = [v for _, v in verdicts if v.status in FAILING]
    judged = [v for _, v in verdicts if v.status in (HELD, NOT_HELD)]
    console.stderr.print(f"check: {len(verdicts)} claims, {len(judged)} judged, "
                         f"{len(failed)} failed"
                         + (" (did not hold or error)" if failed else ""), highlight=False)
    if not judged and not failed and any(v.status == SMOKE for _, v in verdicts):
        console.stderr.print(
            f"check: not judged (smoke): these rows come from a smoke=true run (sizes clamped, "
            f"the smoke timer), whose numbers only show that the configs run (exit "
            f"{EXIT_NOTHING_MEASURED}). Run without smoke=true to judge the claims.",
            highlight=False)
    elif not judged and not failed:
        console.stderr.print(
            f"check: nothing measured: no claim could be judged on these results (exit "
            f"{EXIT_NOTHING_MEASURED}). The rows the claims need are missing: a GPU claim on a "
            "CPU-only run, or a size smoke=true clamped away. Run at full size on the device "
            "the claims name.", highlight=False)


def exit_status(verdicts: Sequence[tuple[str, Verdict]]) -> int:
    """1 when a claim failed, else 3 when none could be judged, else 0 (module docstring)."""
    if any(v.status in FAILING for _, v in verdicts):
        return EXIT_FAILED
    if not any(v.status in (HELD, NOT_HELD) for _, v in verdicts):
        return EXIT_NOTHING_MEASURED
    return 0


def check_sweep(merged: Path) -> int:
    """For ``check=true``: judge a merged sweep file, print the table, return the exit status."""
    # the run that just wrote ``merged`` judges it by the claims it composed from its own
    # configs (stored in the file by this process), --config-dir experiments included
    verdicts = check(load_results([merged]), prefer="results", trust=True)
    print_table(verdicts)
    return exit_status(verdicts)


def main(argv: Sequence[str] | None = None) -> int:
    from runner.cli import OneLineArgumentParser, fail, program
    from runner.storage.result_files import ResultsNotFoundError

    parser = OneLineArgumentParser(
        prog=program("runner.check"),
        description="Judge the claims (expect:) of saved results; exit 1 when one did not "
                    "hold or errored, 3 when none could be judged (nothing measured, or only "
                    "rows of smoke=true, reported as 'not judged (smoke)').")
    add_results_arguments(parser)
    args = parser.parse_args(argv)
    try:
        verdicts = check(load_results(args.results), Path(args.conf_dir), args.claims_from)
    except (ResultsNotFoundError, ClaimSpecError) as exc:
        fail(str(exc), prog=parser.prog)
    print_table(verdicts)
    return exit_status(verdicts)
