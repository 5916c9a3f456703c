"""The claims engine (``runner.claims``): same verdicts as the code it replaced, the criteria,
malformed claims rejected before any trial, and an experiment written only in YAML gated by
``check=true`` and ``python -m runner.check``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from runner.claims.engine import (
    ERROR,
    HELD,
    MEASURED,
    NOT_HELD,
    NOT_MEASURED,
    Measurement,
    judge,
)
from runner.claims.results import load_results
from runner.claims.spec import Aggregate, Claim

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = REPO_ROOT / "docs" / "data"
#: The 16 lessons re-run on the H200 (benchmarks/lessons_check.sh).
LESSONS_H200 = DATA / "h200-experiments-2026-11-24.parquet"
#: Which verdicts did not hold there: findings about Hopper or the host, each explained in its
#: experiment's why: (a change here is a change of finding, to be explained there too).
NOT_HELD_ON_H200 = {"dtype_cliff": 2, "tensor_core_alignment": 1, "copy_compute_overlap": 1,
                    "batching": 2, "memory_layout": 1, "transfers": 1, "cpu_threads": 1,
                    "cpu_vs_gpu": 1}


# ---------------------------------------------------------------------------------------
# The lessons on the H200: each verdict names its time
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_lessons_on_the_h200_name_their_time_and_streams_read_the_device() -> None:
    from runner.claims.check import check

    verdicts = check(load_results([LESSONS_H200]), prefer="conf")
    assert len({name for name, _ in verdicts}) == 16
    assert all(v.time for _, v in verdicts), [v.claim for _, v in verdicts if not v.time]
    assert not [v for _, v in verdicts if v.status in (ERROR, NOT_MEASURED)]
    failed: dict[str, int] = {}
    for name, v in verdicts:
        failed[name] = failed.get(name, 0) + (v.status == NOT_HELD)
    assert {k: n for k, n in failed.items() if n} == NOT_HELD_ON_H200
    streams = [v for name, v in verdicts if name == "streams"]
    # overlap judged on what the GPU did (256³: 1.94x less device time per matmul on 4
    # streams), and the host's side on the loop time (18 -> 63 µs per matmul): all three held
    assert [(v.status, v.time) for v in streams] == [
        (HELD, "device time per op"), (HELD, "device time per op"), (HELD, "loop time per op")]
    assert streams[1].measured.startswith("256³: 1.9")
    graphs = [v for name, v in verdicts if name in ("cuda_graphs", "batching")]
    assert {v.time for v in graphs} == {"loop time per op"}


@pytest.mark.slow
def test_check_command_on_saved_results(capsys: pytest.CaptureFixture[str]) -> None:
    from runner.claims.check import EXIT_FAILED, EXIT_NOTHING_MEASURED, main

    assert main([str(LESSONS_H200), "--claims-from", "conf"]) == EXIT_FAILED  # some did not hold
    out = capsys.readouterr().out
    assert "did not hold" in out and "cpu_vs_gpu" in out and "device time per op" in out
    assert "device time per op" in out and "loop time per op" in out  # the time column
    # results without claims: nothing could be judged, a distinct exit status
    assert main([str(DATA / "h200-foundation-2026-11-21.parquet")]) == EXIT_NOTHING_MEASURED
    assert "nothing measured" in capsys.readouterr().err


def test_report_shows_an_error_verdict_as_one() -> None:
    from runner.claims.report import render
    from runner.claims.results import Expectations, Results

    rows = SPEEDUP.assign(experiment="mine")
    broken = _claim(_target_="tests.test_claims.raises", at_least=1.0)
    text = render(Results(rows, {"mine": Expectations([_claim(at_least=2.0), broken])}))
    assert "| experiment | held | did not hold | not measured | error | trials |" in text
    assert "| [mine](#mine) | 1 | 0 | 0 | 1 | 4 |" in text
    assert "- **error**: graphs are faster. Measured: ZeroDivisionError: a bug in the claim." \
        in text
    assert "**Verdict:** 1 held, 0 did not hold, 0 not measured, 1 error." in text


# ---------------------------------------------------------------------------------------
# The engine on hand-made rows
# ---------------------------------------------------------------------------------------

def _rows(*rows: dict[str, Any]) -> pd.DataFrame:
    base = {"status": "ok", "device": "cuda:0", "op": "matmul", "dtype": "fp32",
            "shape_str": "8x8x8", "graph": "none"}
    return pd.DataFrame([{**base, **r} for r in rows])


SPEEDUP = _rows({"graph": "none", "time_per_op_us": 84.0},
                {"graph": "cuda_graph", "time_per_op_us": 10.0},
                {"device": "cpu", "graph": "none", "time_per_op_us": 1.0},
                {"graph": "cuda_graph", "time_per_op_us": 5.0, "status": "error"})


def _claim(**fields: Any) -> Claim:
    base = dict(claim="graphs are faster", where={"device": "cuda"},
                numerator={"graph": "none"}, denominator={"graph": "cuda_graph"})
    return Claim(**{**base, **fields})


@pytest.mark.parametrize(("fields", "status"), [
    ({"half_of_claimed_gain": 15.63}, HELD),      # 8.4x >= 1 + 14.63 / 2 = 8.315x
    ({"half_of_claimed_gain": 16.0}, NOT_HELD),   # 8.4x < 8.5x
    ({"at_least": 8.4}, HELD),
    ({"below": 8.4}, NOT_HELD),
    ({"at_most": 8.4}, HELD),
    ({"within": [8.0, 9.0]}, HELD),
    ({"within": [1.0, 2.0]}, NOT_HELD),
])
def test_comparisons(fields: dict[str, Any], status: str) -> None:
    (verdict,) = judge([_claim(**fields)], SPEEDUP)
    assert verdict.status == status, verdict
    assert verdict.value == pytest.approx(8.4)  # cpu and error rows are not read
    assert "8.4x (84 µs / 10 µs)" in verdict.measured


def test_missing_rows_are_not_measured_and_a_code_error_is_an_error() -> None:
    cpu_claim = _claim(where={"device": "cpu"}, at_least=1.0)  # no cpu graph rows
    ambiguous = _claim(where={}, aggregate=Aggregate.one, at_least=1.0)  # 2 ok eager rows
    broken = _claim(_target_="tests.test_claims.raises", at_least=1.0)
    info = _claim(_target_="tests.test_claims.informs")
    verdicts = judge([cpu_claim, ambiguous, broken, info], SPEEDUP)
    assert [v.status for v in verdicts] == [NOT_MEASURED, ERROR, ERROR, MEASURED]
    assert "exactly one" in verdicts[1].measured
    assert verdicts[2].measured == "ZeroDivisionError: a bug in the claim"
    assert verdicts[3].measured == "42 rows"


def raises(rows: pd.DataFrame, claim: Claim) -> Measurement:
    raise ZeroDivisionError("a bug in the claim")


def informs(rows: pd.DataFrame, claim: Claim) -> Measurement:
    return Measurement(None, "42 rows")


def test_each_combines_and_needs_every_item() -> None:
    rows = _rows({"device": "cpu", "rel_error": 1e-6}, {"device": "cuda:1", "rel_error": 3e-6})
    claim = Claim(claim="small error", metric="rel_error", at_most=1e-5,
                  each=[{"where": {"device": "cpu"}, "label": "cpu"},
                        {"where": {"device": "cuda"}, "label": "gpu"}])
    (verdict,) = judge([claim], rows)
    assert verdict.status == HELD and verdict.value == pytest.approx(3e-6)
    assert "max of: cpu 1e-06, gpu 3e-06" in verdict.measured
    (verdict,) = judge([claim], rows[rows["device"] == "cpu"])
    assert verdict.status == NOT_MEASURED and "for gpu" in verdict.measured


# ---------------------------------------------------------------------------------------
# Malformed claims: rejected before any trial, naming the key, the value and the fix
# ---------------------------------------------------------------------------------------

GOOD = ("{claim: c, where: {op: add}, numerator: {shape: [64]}, denominator: {shape: [8]}, "
        "metric: numel, at_least: 2}")
MALFORMED = {
    "unknown_comparison": (GOOD.replace("at_least", "greater_than"),
                           ["expect[0].greater_than", "2", "Valid keys", "at_least"]),
    "unknown_aggregate": (GOOD.replace("metric:", "aggregate: mediam, metric:"),
                          ["expect[0].aggregate", "'mediam'", "Valid choices: median"]),
    "unknown_column": (GOOD.replace("{op: add}", "{op: add, dtpye: fp32}"),
                       ["expect[0].where.dtpye", "'dtpye'", "Did you mean 'dtype'?"]),
    "missing_threshold": (GOOD.replace(", at_least: 2", ""),
                          ["expect[0]", "'c'", "no threshold", "half_of_claimed_gain"]),
    "bad_target": (GOOD.replace("metric:", "_target_: runner.claims.bespoke.nope, metric:"),
                   ["expect[0]._target_", "'runner.claims.bespoke.nope'", "fn(rows, claim)"]),
    "two_comparisons": (GOOD.replace("at_least: 2", "at_least: 2, below: 3"),
                        ["expect[0]", "at_least, below", "exactly one"]),
    "not_numeric": (GOOD.replace("numel", "dtype"),
                    ["expect[0].metric", "'dtype'", "time_per_op_us"]),
    "half_a_ratio": (GOOD.replace(", denominator: {shape: [8]}", ""),
                     ["expect[0]", "numerator", "no denominator"]),
}


def _experiment(expect: str, pivots: str = "[]") -> str:
    return ("# @package _global_\n"
            "defaults:\n  - override /timer: smoke\n"
            "device: cpu\ncheck_accuracy: false\n"
            "cases:\n  - {op: add, shape: [[8], [64]]}\n"
            f"expect:\n  - {expect}\npivots: {pivots}\n")


@pytest.fixture()
def conf_dir(tmp_path: Path) -> Path:
    """A config directory of experiment files only (``--config-dir``), next to conf/."""
    folder = tmp_path / "my_conf" / "experiment"
    folder.mkdir(parents=True)
    for kind, (expect, _) in MALFORMED.items():
        (folder / f"bad_{kind}.yaml").write_text(_experiment(expect), encoding="utf-8")
    (folder / "mine.yaml").write_text(_experiment(GOOD), encoding="utf-8")
    (folder / "mine_false.yaml").write_text(_experiment(
        GOOD.replace("claim: c", "claim: 'a 64-element add is 100x the work'")
        .replace("at_least: 2", "at_least: 100"),
        "[{title: elements, rows: [shape], metric: numel}]"), encoding="utf-8")
    return tmp_path / "my_conf"


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_claims_fail_before_hydra_runs(kind: str, conf_dir: Path) -> None:
    from runner.config.overrides import check_command_line
    from runner.core.errors import ConfigError

    with pytest.raises(ConfigError) as error:
        check_command_line(["--config-dir", str(conf_dir), f"experiment=bad_{kind}"])
    for part in MALFORMED[kind][1]:
        assert part in str(error.value), str(error.value)


def test_malformed_claims_are_checked_when_a_job_is_planned(compose: Any) -> None:
    """The same checks inside the job (Hydra's searchpath bypasses the command-line check)."""
    from runner.config.planner import plan_job
    from runner.core.errors import ConfigError

    cfg = compose("experiment=cuda_graphs", "expect=[{claim: c, where: {grpah: none}, "
                  "at_least: 1}]")
    with pytest.raises(ConfigError, match=r"expect\[0\]\.where\.grpah.*Did you mean 'graph'"):
        plan_job(cfg)
    assert plan_job(compose("experiment=cuda_graphs"))  # the committed claims are well-formed


def test_a_malformed_claim_exits_2_and_runs_nothing(start_cli: Any, conf_dir: Path,
                                                    tmp_path: Path) -> None:
    run = start_cli(["--config-dir", str(conf_dir), "experiment=bad_unknown_column"],
                    tmp_path).wait()
    assert run.returncode == 2, run.explain()
    assert "expect[0].where.dtpye" in run.err and "Traceback" not in run.stderr
    assert not (tmp_path / "results").exists()


# ---------------------------------------------------------------------------------------
# An experiment in YAML alone, as a CI gate
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_claims_from_yaml_alone_gate_a_sweep(start_cli: Any, conf_dir: Path,
                                             tmp_path: Path) -> None:
    single, multi = tmp_path / "single", tmp_path / "multi"
    passing = start_cli(["--config-dir", str(conf_dir), "experiment=mine", "check=true"], single)
    failing = start_cli(["--config-dir", str(conf_dir), "-m", "experiment=mine,mine_false",
                         "check=true"], multi)
    passing.wait(), failing.wait()
    assert passing.returncode == 0, passing.explain()
    assert "held" in passing.stdout and "numel" in passing.stdout
    assert failing.returncode == 1, failing.explain()
    assert "did not hold" in failing.stdout and "100x the work" in failing.stdout
    # the saved results remember their claims: re-checking them needs no config directory
    (sweep,) = (multi / "results").iterdir()
    recheck = start_cli([str(sweep)], tmp_path, module="runner.check").wait()
    assert recheck.returncode == 1, recheck.explain()
    report = start_cli([str(sweep), "--out", str(tmp_path / "r.md")], tmp_path,
                       module="runner.claims.report").wait()
    assert report.returncode == 0, report.explain()
    text = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "## mine_false" in text and "**elements** (numel)." in text
    assert "- **did not hold**: a 64-element add is 100x the work." in text


@pytest.mark.slow
def test_claims_import_no_torch_and_nothing_of_the_run_side() -> None:
    """runner/claims reads results: it takes from the run side only the storage schema (which
    derives its axis columns from the axis registry, a standard-library declaration)."""
    import subprocess
    import sys

    code = ("import sys, runner.claims.check, runner.claims.report, runner.claims.bespoke\n"
            "allowed = ('runner.config', 'runner.core.axes', 'runner.core.errors')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or (m.startswith("
            "('runner.config', 'runner.execution', 'runner.timing')) and m not in allowed)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------------------------------
# Which time a claim reads
# ---------------------------------------------------------------------------------------

TIMED = _rows({"graph": "none", "time_per_op_us": 80.0, "gpu_time_per_op_us": 10.0},
              {"graph": "cuda_graph", "time_per_op_us": 10.0, "gpu_time_per_op_us": 10.0})


def test_a_claim_reads_the_device_time_by_default_on_cuda_rows_and_says_so() -> None:
    default, loop, device = judge([_claim(below=1.1), _claim(below=1.1, time="loop"),
                                   _claim(below=1.1, time="device")], TIMED)
    assert (default.status, default.time) == (HELD, "device time per op (default)")
    assert (loop.status, loop.time) == (NOT_HELD, "loop time per op")  # launch cost: 8x
    assert (device.status, device.time) == (HELD, "device time per op")
    assert "Time: device time per op." in device.line()


def test_cpu_rows_have_only_the_loop_time() -> None:
    cpu = TIMED.assign(device="cpu", gpu_time_per_op_us=None)
    default, device = judge([_claim(where={"device": "cpu"}, at_least=2.0),
                             _claim(where={"device": "cpu"}, at_least=2.0, time="device")], cpu)
    assert (default.status, default.time) == (HELD, "loop time per op (default)")
    assert device.status == NOT_MEASURED  # no device time on a CPU: not silently the loop's


def test_time_and_metric_together_are_refused() -> None:
    from runner.claims.spec import ClaimSpecError, check, parse

    claims = parse([{"claim": "c", "time": "loop", "metric": "tflops", "at_least": 1}],
                   Claim, "expect")
    with pytest.raises(ClaimSpecError, match=r"both time: loop and metric: tflops"):
        check(claims, [])
    with pytest.raises(ClaimSpecError, match=r"expect\[0\]\.time.*Valid choices: device, loop"):
        parse([{"claim": "c", "time": "gpu", "at_least": 1}], Claim, "expect")


# ---------------------------------------------------------------------------------------
# Gates that cannot pass on nothing
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_check_true_where_no_claim_can_be_judged_exits_3(start_cli: Any, tmp_path: Path) -> None:
    """dtype_cliff's claims are about the GPU at 2048³: a smoke run on a CPU measures none."""
    from runner.claims.check import EXIT_NOTHING_MEASURED

    run = start_cli(["experiment=dtype_cliff", "smoke=true", "check=true", "device=cpu"],
                    tmp_path).wait()
    assert run.returncode == EXIT_NOTHING_MEASURED == 3, run.explain()
    assert "not judged (smoke)" in run.stderr and "Traceback" not in run.stderr
    assert "0 judged" in run.stderr
    # the saved sweep remembers it ran with smoke=true: checked later, still not judged
    (sweep,) = (tmp_path / "results").iterdir()
    recheck = start_cli([str(sweep)], tmp_path, module="runner.check").wait()
    assert recheck.returncode == 3, recheck.explain()
    assert "not judged (smoke)" in recheck.stdout and "held" not in recheck.stdout


def test_smoke_rows_are_not_judged_and_a_full_sweep_beside_them_is(conf_dir: Path) -> None:
    """A claim that "held" on a smoke run's numbers would be luck: every claim of a sweep of
    smoke rows is *not judged (smoke)*, and the check exits 3, not 0 or 1."""
    from runner.claims.check import check, exit_status
    from runner.claims.engine import SMOKE
    from runner.claims.results import Results

    (conf_dir / "experiment" / "mine.yaml").write_text(_experiment(
        "{claim: an add takes at least 50 µs, where: {op: add}, at_least: 50}"),
        encoding="utf-8")
    rows = _rows({"op": "add", "shape_str": "8", "time_per_op_us": 3.3},
                 {"op": "add", "shape_str": "8", "time_per_op_us": 3.4})
    smoke = rows.assign(experiment="mine", sweep_id="smoke", smoke=True)
    verdicts = check(Results(smoke), conf_dir, prefer="conf")
    assert [v.status for _, v in verdicts] == [SMOKE]
    assert exit_status(verdicts) == 3
    full = rows.assign(experiment="mine", sweep_id="full", smoke=False, time_per_op_us=111.0)
    both = check(Results(pd.concat([smoke, full], ignore_index=True)), conf_dir, prefer="conf")
    assert [(name, v.status) for name, v in both] == [("mine @ smoke", SMOKE),
                                                      ("mine @ full", HELD)]
    assert exit_status(both) == 0


def _sweep_file(folder: Path, sweep: str, time_us: float) -> Path:
    rows = _rows({"op": "add", "shape_str": "8", "time_per_op_us": time_us},
                 {"op": "add", "shape_str": "8", "time_per_op_us": time_us * 1.02})
    path = folder / sweep / "mine.parquet"
    path.parent.mkdir(parents=True)
    rows.assign(sweep_id=sweep, device="cpu").to_parquet(path)
    return path


def test_check_judges_each_sweep_on_its_own_rows(tmp_path: Path, conf_dir: Path) -> None:
    """A smoke run (3.3 µs) and a full run (111 µs) of one experiment: each judged alone; a
    median pooled over both (≈ 57 µs) is a number neither run measured."""
    from runner.claims.check import check

    (conf_dir / "experiment" / "mine.yaml").write_text(_experiment(
        "{claim: an add takes at least 50 µs, where: {op: add}, at_least: 50}"),
        encoding="utf-8")
    files = [_sweep_file(tmp_path, "smoke", 3.31), _sweep_file(tmp_path, "full", 111.0)]
    verdicts = check(load_results(files), conf_dir, prefer="conf")
    assert [(name, v.status) for name, v in verdicts] == [
        ("mine @ smoke", NOT_HELD), ("mine @ full", HELD)]
    assert "3.34 µs" in verdicts[0][1].measured and "112 µs" in verdicts[1][1].measured
    assert not any("57" in v.measured for _, v in verdicts)


def test_a_malformed_description_fails_before_hydra_runs(conf_dir: Path) -> None:
    from runner.config.overrides import check_command_line
    from runner.core.errors import ConfigError

    path = conf_dir / "experiment" / "mine.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(
        "defaults:", "question: [is it, fast]\ndefaults:"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"experiment mine: question.*Expected text"):
        check_command_line(["--config-dir", str(conf_dir), "experiment=mine"])
