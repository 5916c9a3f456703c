"""The lesson experiments (``conf/experiment/*.yaml``), their claims and their report
(``runner.claims.report``).

* Every experiment file describes itself in typed keys (title, question, expected, why,
  source), names its tutorial by title, and the report renders them.
* Every experiment runs at smoke size on a CPU with ``smoke=true``: all of them in two
  ``-m experiment=a,b,...`` multiruns that conftest starts when collection ends (``CLI_RUNS``,
  so they overlap with the in-process tests), each experiment checked on its own job's rows,
  found through the merged file's metadata, so a failure names the experiment.
* ``python -m runner.claims.report`` turns those results into a report with a heading and a
  verdict line per experiment, and reads an experiment's name from a file's stem when the
  metadata has none.
* Every claim of every lesson is measurable from its experiment's full-size trial plan (a
  claim selects rows by op, parameters and shapes, so a config edit that breaks a claim
  fails here), and the criteria give the documented answers on hand-made data.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from runner.claims import report
from runner.claims.engine import ERROR, HELD, MEASURED, NOT_HELD, NOT_MEASURED, judge
from runner.claims.results import Results, load_results
from runner.storage.files import read_metadata

REPO_ROOT = Path(__file__).resolve().parent.parent
EXPERIMENT_DIR = REPO_ROOT / "conf" / "experiment"
EXPERIMENTS = sorted(p.stem for p in EXPERIMENT_DIR.glob("*.yaml"))
#: The lesson experiments (the others predate them and make no tutorial's claim to check).
LESSONS = [name for name in report.LESSON_ORDER if name in EXPERIMENTS]

#: Experiments split into multiruns that run side by side; the compile-heavy ones apart.
COMPILE_HEAVY = {"compile_fusion", "compile_recompilation", "execution_modes"}
GROUPS = {
    "compile": [n for n in EXPERIMENTS if n in COMPILE_HEAVY],
    "rest": [n for n in EXPERIMENTS if n not in COMPILE_HEAVY],
}


@pytest.mark.slow
def test_every_lesson_has_a_config() -> None:
    assert set(report.LESSON_ORDER) <= set(EXPERIMENTS), (
        set(report.LESSON_ORDER) - set(EXPERIMENTS))
    for name in report.LESSON_ORDER:
        assert _expectations(name).claims, f"{name}: no claims (expect:) in its YAML"


def _expectations(name: str) -> Any:
    """The claims and pivots of ``conf/experiment/<name>.yaml``."""
    return Results(pd.DataFrame()).expectations(name)


def _verdicts(name: str, df: pd.DataFrame) -> list[Any]:
    return judge(_expectations(name).claims, df)


# ---------------------------------------------------------------------------------------
# The description: typed keys
# ---------------------------------------------------------------------------------------

#: What a lesson's source names: one of the five tutorials, by title.
TUTORIALS = ("CUDA operations in PyTorch", "PyTorch CUDA 101", "make_graphed_callables",
             "PyTorch as a GPU computation library", "PyTorch handling of GPU devices")


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_describes_itself_in_typed_keys(name: str) -> None:
    from omegaconf import OmegaConf

    text = (EXPERIMENT_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "# @package _global_"
    assert not re.search(r"\bseeds? \d{3}", text, re.I), f"{name}: names a tutorial by number"
    assert not re.search(r"^# (Question|Expect|Why|Source)\b", text, re.M), (
        f"{name}: a description field left as a comment")
    node = OmegaConf.load(EXPERIMENT_DIR / f"{name}.yaml")
    keys = ("title", "question", "expected", "source") + (("why",) if name in LESSONS else ())
    for key in keys:
        assert isinstance(node.get(key), str) and node.get(key).strip(), f"{name}: no {key}:"
    if name in LESSONS:
        assert any(t in node.source for t in TUTORIALS), f"{name}: source names no tutorial"
        assert report.description(EXPERIMENT_DIR / f"{name}.yaml")["why"]


# ---------------------------------------------------------------------------------------
# Every experiment at smoke size on the CPU
# ---------------------------------------------------------------------------------------

def CLI_RUNS() -> dict[str, Any]:  # noqa: N802 (the name conftest looks for)
    """One multirun per group; conftest starts them as soon as collection ends."""
    return {f"smoke_{group}": ["-m", "experiment=" + ",".join(names), "smoke=true"]
            for group, names in GROUPS.items() if names}


@pytest.fixture(scope="module")
def smoke_runs(cli_runs: dict[str, Any]) -> dict[str, Any]:
    return {group: cli_runs[f"smoke_{group}"] for group, names in GROUPS.items() if names}


def _group_of(name: str) -> str:
    return next(group for group, names in GROUPS.items() if name in names)


def _merged(run: Any) -> Path:
    run.wait()
    assert run.returncode == 0, run.explain()
    files = sorted((run.cwd / "results").glob("*/results.parquet"))
    assert len(files) == 1, (files, run.explain())
    return files[0]


def _rows_of(path: Path, name: str) -> pd.DataFrame:
    """The rows of the job that ran experiment ``name``, found through the metadata."""
    jobs = [job["job_num"] for job in read_metadata(path)["jobs"]
            if job.get("choices", {}).get("experiment") == name]
    assert len(jobs) == 1, f"experiment {name}: expected one job in {path}, found {jobs}"
    df = pq.read_table(path).to_pandas()
    return df[df["job_num"] == jobs[0]]


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_runs_at_smoke_size(smoke_runs: dict[str, Any], name: str) -> None:
    df = _rows_of(_merged(smoke_runs[_group_of(name)]), name)
    assert len(df) > 0, f"experiment {name} ran no trial"
    errors = df[~df["status"].isin(["ok", "skipped"])]
    assert errors.empty, f"experiment {name}:\n" + errors[
        ["op", "params_json", "shape_str", "status", "reason"]].to_string()
    skipped = df[df["status"] == "skipped"]
    assert skipped["reason"].fillna("").str.len().gt(0).all(), "a skipped row has no reason"
    assert (df["timer_preset"] == "smoke").all()
    assert df["shape"].map(lambda s: max(s) <= 16).all(), "smoke=true did not clamp a shape"


@pytest.mark.slow
def test_lessons_report_over_the_smoke_runs(smoke_runs: dict[str, Any], start_cli: Any,
                                            tmp_path: Path) -> None:
    merged = [str(_merged(run)) for run in smoke_runs.values()]
    out = tmp_path / "experiments.md"
    run = start_cli([*merged, "--out", str(out), "--banner", "placeholder: smoke numbers"],
                    tmp_path, module="runner.claims.report").wait()
    assert run.returncode == 0, run.explain()
    text = out.read_text(encoding="utf-8")
    assert "placeholder: smoke numbers" in text
    sections = _sections(text)
    for name in EXPERIMENTS:
        assert name in sections, f"no '## {name}' heading in the report"
        assert "**Verdict:**" in sections[name], f"{name}: no verdict line"
        assert "| op | params |" in sections[name], f"{name}: no results table"
    # claims that CPU rows can answer are answered, even through runner.storage.load's nullable
    # columns (compile_dynamic is pd.NA there, which must count as "not set")
    for name in ("compile_recompilation", "cpu_threads"):
        assert "**not measured**" not in sections[name], sections[name]
    for name in LESSONS:  # every lesson states its claims, measured or not
        assert re.search(r"^- \*\*(held|did not hold|not measured|measured)\*\*",
                         sections[name], re.M), f"{name}: no claim lines"
        assert "- **error**" not in sections[name], sections[name]


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    return {part.splitlines()[0].strip(): part for part in parts}


def test_experiment_name_falls_back_to_the_file_stem(tmp_path: Path) -> None:
    rows = _fake_frame("cuda_graphs", [
        {"op": "pointwise_chain", "graph": "none", "time_median_us": 26200.0},
        {"op": "pointwise_chain", "graph": "cuda_graph", "time_median_us": 2740.0},
    ])
    path = tmp_path / "cuda_graphs.parquet"
    rows.drop(columns=["experiment"]).to_parquet(path)  # plain pandas: no opsweep metadata
    results = load_results([path])
    assert set(results.rows["experiment"]) == {"cuda_graphs"}
    claims = judge(results.expectations("cuda_graphs").claims, results.rows)
    assert claims[0].status == HELD, claims[0]
    assert "9.56x" in claims[0].measured


def test_missing_results_fail_with_one_line(start_cli: Any, tmp_path: Path) -> None:
    run = start_cli([str(tmp_path / "nothing.parquet")], tmp_path,
                    module="runner.claims.report").wait()
    assert run.returncode == 2
    assert "error:" in run.stderr and "Traceback" not in run.stderr


# ---------------------------------------------------------------------------------------
# Verdicts on full-size plans (fake numbers) and on hand-made data
# ---------------------------------------------------------------------------------------

def _fake_frame(name: str, rows: list[dict[str, Any]]) -> pd.DataFrame:
    base = {"status": "ok", "reason": None, "device": "cuda:0", "dtype": "fp32",
            "shape_str": "1", "streams": 1, "graph": "none", "compile": "none",
            "compile_dynamic": None, "backward": False, "num_threads": None,
            "params_json": "{}", "job_num": 0, "device_name": "Fake GPU",
            "torch_version": "0.0", "timer_preset": "quick",
            "timestamp": datetime(2026, 1, 1, tzinfo=timezone.utc)}
    df = pd.DataFrame([{**base, **row} for row in rows])
    df["time_per_op_us"] = df["time_median_us"] / df["streams"]
    if "gpu_time_per_op_us" not in df:  # the device time, on CUDA rows: the same numbers
        on_cuda = df["device"].astype(str).str.startswith("cuda")
        df["gpu_time_per_op_us"] = df["time_per_op_us"].where(on_cuda)
    df["experiment"] = name
    return df


def _planned_rows(name: str, compose: Any, plan_trials: Any) -> pd.DataFrame:
    """The experiment's full-size trials as ok rows with made-up numbers, as if measured on a
    machine with one GPU."""
    from runner.execution.trial import spec_columns

    cfg = compose(f"experiment={name}")
    rows = []
    for index, (_, spec) in enumerate(plan_trials(cfg)):
        row = spec_columns(spec)
        t = 10.0 * (index + 1)
        row.update(status="ok", reason=None, job_num=0, trial_index=index,
                   time_median_us=t, time_per_op_us=t / spec.streams,
                   gpu_time_per_op_us=t / spec.streams if row["device"] != "cpu" else None,
                   tflops=1.0 + index,
                   gbps=1.0 + index, rel_error=1e-6, peak_allocated_bytes=(3 - index % 2) << 20,
                   peak_reserved_bytes=4 << 20, device_name="Fake GPU", cpu_model="Fake CPU",
                   cpu_count=16, torch_version="0.0", timer_preset="quick",
                   timestamp=datetime(2026, 1, 1, tzinfo=timezone.utc))
        if row["compile"] != "none":
            row.update(recompile_count=index % 3, compile_time_s=1.5, graph_count=1)
        if spec.op == "alloc":
            rows_n, max_cols = spec.shape
            reserved = 0
            for step, cols in enumerate((2 * max_cols // 3, max_cols // 3, max_cols), 1):
                reserved = max(reserved, rows_n * cols * 4) if step < 3 else \
                    reserved + rows_n * cols * 4
                row[f"extra_allocated_bytes_step{step}_cols{cols}"] = rows_n * cols * 4
                row[f"extra_reserved_bytes_step{step}_cols{cols}"] = reserved
        rows.append(row)
    df = pd.DataFrame(rows)
    df["experiment"] = name
    return df


@pytest.mark.fast_sample(every=8)
@pytest.mark.parametrize("name", LESSONS)
def test_every_claim_is_measurable_at_full_size(name: str, compose: Any, plan_trials: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.core.axes

    # device auto = cuda:0
    monkeypatch.setattr(runner.core.axes, "cuda_device_count", lambda: 1)
    df = _planned_rows(name, compose, plan_trials)
    claims = _verdicts(name, df)
    assert claims, f"{name}: no claims"
    unmeasured = [c for c in claims if c.status in (NOT_MEASURED, ERROR)]
    assert not unmeasured, (f"{name}: these claims find no rows in the experiment's own "
                            f"full-size plan:\n" + "\n".join(c.line() for c in unmeasured))
    section = report.experiment_section(name, df, _expectations(name))
    assert f"## {name}" in section and ("Fake GPU" in section or "Fake CPU" in section)


def test_dtype_cliff_criterion() -> None:
    def frame(t64: float) -> pd.DataFrame:
        return _fake_frame("dtype_cliff", [
            {"op": "matmul", "dtype": d, "shape_str": "2048x2048x2048", "time_median_us": t}
            for d, t in (("fp64", t64), ("fp32", 100.0), ("fp16", 50.0))])

    held, not_held = _verdicts("dtype_cliff", frame(1600.0)), \
        _verdicts("dtype_cliff", frame(100.0))
    # fp32 16x (claimed 15.6x: held), fp16 32x (claimed 62x, bar 31.5x: held)
    assert [c.status for c in held] == [HELD, HELD]
    # fp32 1x, fp16 2x: neither
    assert [c.status for c in not_held] == [NOT_HELD, NOT_HELD]
    assert "(1.6 ms / 100 µs)" in held[0].measured


def test_caching_allocator_reads_the_tutorials_numbers() -> None:
    mib = 1 << 20
    df = _fake_frame("caching_allocator", [{
        "op": "alloc", "shape_str": "4096x3072", "time_median_us": 5.0,
        "extra_reserved_bytes_step1_cols2048": 32 * mib,
        "extra_reserved_bytes_step2_cols1024": 32 * mib,
        "extra_reserved_bytes_step3_cols3072": 80 * mib}])
    claims = _verdicts("caching_allocator", df)
    assert [c.status for c in claims[:2]] == [HELD, HELD]
    assert "step 3 (3072 cols) 80 MiB" in claims[0].measured


def test_recompilation_verdict_uses_exact_counts() -> None:
    rows = [{"op": "varying_inputs", "compile": "default", "param_vary": vary,
             "compile_dynamic": dyn, "recompile_count": n, "time_median_us": 1.0}
            for vary, dyn, n in (("none", None, 0), ("dtype", None, 2), ("shape", None, 1),
                                 ("shape", True, 0), ("shape", False, 2))]
    claims = _verdicts("compile_recompilation", _fake_frame("compile_recompilation", rows))
    assert [c.status for c in claims[:4]] == [HELD] * 4
    rows[2]["recompile_count"] = 2  # a shape change that recompiles every time
    claims = _verdicts("compile_recompilation", _fake_frame("compile_recompilation", rows))
    assert claims[1].status == NOT_HELD


@pytest.mark.slow
def test_verdicts_on_empty_or_odd_data_do_not_raise() -> None:
    empty = pd.DataFrame({"status": [], "device": [], "op": []})
    for name in LESSONS:
        for claim in _verdicts(name, empty):
            assert claim.status in (NOT_MEASURED, MEASURED), claim
    odd = _fake_frame("streams", [{"op": "matmul", "shape_str": "1000x1000x1000",
                                   "time_median_us": float("nan")}])
    assert [c.status for c in _verdicts("streams", odd)] == [NOT_MEASURED] * 3
    text = report.render(Results(pd.concat([odd, _fake_frame("unknown_lesson", [
        {"op": "add", "time_median_us": 1.0}])])))
    assert "## streams" in text and "## unknown_lesson" in text
    assert "states no claim" in text


# ---------------------------------------------------------------------------------------
# The varying_inputs op behind compile_recompilation
# ---------------------------------------------------------------------------------------

def _varying(vary: str, shape: tuple[int, ...] = (8, 6), dtype: Any = None) -> Any:
    import torch

    from ops.base import OpContext
    from ops.varying_inputs import build

    ctx = OpContext(shape=shape, dtype=dtype or torch.float32, device=torch.device("cpu"),
                    generator=torch.Generator().manual_seed(0))
    return build(ctx, vary=vary)


@pytest.mark.parametrize("vary", ["none", "shape", "dtype"])
def test_varying_inputs_reference_matches_the_next_call(vary: str) -> None:
    import torch

    from ops.base import relative_error

    workload = _varying(vary)
    seen = []
    for _ in range(4):  # more than one cycle: the reference always tracks the next pair
        reference = workload.reference()
        out = workload.fn()
        assert out.shape == reference.shape
        assert relative_error(out, reference) <= (workload.tolerance or 1e-6)
        seen.append((tuple(out.shape), out.dtype))
    expected = {
        "none": [((8, 6), torch.float32)] * 4,
        "shape": [((8, 6), torch.float32), ((4, 6), torch.float32), ((2, 6), torch.float32),
                  ((8, 6), torch.float32)],
        "dtype": [((8, 6), torch.float32), ((8, 6), torch.float64), ((8, 6), torch.float16),
                  ((8, 6), torch.float32)],
    }[vary]
    assert seen == expected
    assert workload.flops == 48 and workload.bytes_moved == 3 * 48 * 4  # the first pair's


@pytest.mark.parametrize(("vary", "dynamic", "recompiles"), [
    ("none", None, 0), ("dtype", None, 2), ("shape", None, 1), ("shape", False, 2),
    ("shape", True, 0)])
def test_varying_inputs_recompiles_as_documented(vary: str, dynamic: bool | None,
                                                 recompiles: int) -> None:
    """Dynamo's guards decide recompiles, whatever the backend: the eager backend keeps this
    fast. The shape is not square (duck sizing would add a recompile under dynamic=True)."""
    import torch
    from torch._dynamo.utils import counters

    workload = _varying(vary, shape=(16, 12))
    torch._dynamo.reset()
    counters.clear()
    try:
        fn = torch.compile(workload.fn, backend="eager", dynamic=dynamic)
        fn()
        first = counters["stats"]["unique_graphs"]
        for _ in range(8):
            fn()
        assert counters["stats"]["unique_graphs"] - first == recompiles
    finally:
        torch._dynamo.reset()


def _streams_rows(device_time: bool) -> pd.DataFrame:
    """256³ and 4096³ matmuls on 1/2/4 streams: the host loop pays more per matmul on more
    streams (launch-bound), the GPU overlaps the small ones."""
    rows = []
    for n, loop, device in ((256, (28.0, 75.0, 72.0), (6.7, 5.1, 3.6)),
                            (1000, (53.0, 66.0, 71.0), (50.2, 46.9, 46.2)),
                            (4096, (2769.0, 2709.0, None), (2676.0, 2676.0, None))):
        for streams, t_loop, t_dev in zip((1, 2, 4), loop, device, strict=True):
            if t_loop is None:
                continue
            rows.append({"op": "matmul", "shape_str": f"{n}x{n}x{n}", "streams": streams,
                         "time_median_us": t_loop * streams,
                         "gpu_time_per_op_us": t_dev if device_time else None,
                         "gpu_time_us": t_dev * streams if device_time else None})
    return _fake_frame("streams", rows)


def test_report_renders_the_typed_description_and_each_verdicts_time() -> None:
    section = report.experiment_section("streams", _streams_rows(True), _expectations("streams"))
    assert "*CUDA streams — do independent matmuls overlap on separate streams?*" in section
    assert "**Question.** Is running N independent matmuls on N streams" in section
    assert "**Why.** Streams only help kernels" in section
    assert "**Source.** CUDA operations in PyTorch" in section
    assert "*Time: device time per op.*" in section and "*Time: loop time per op.*" in section
    assert "**Device time per matmul (GPU)** (device time per op)." in section
    # every trial shows its device time beside its loop time, per call and per op
    assert "| loop median |" in section and "| device time | device per op |" in section


def test_closing_note_lists_the_verdicts_that_changed_and_why() -> None:
    before = Results(_streams_rows(False))  # a run older than the device time
    now = Results(_streams_rows(True))
    text = report.render(now, since=("2026-11-21", before))
    note = text.split("## What changed since the 2026-11-21 data")[1]
    assert "streams only help kernels that under-use the GPU" in note
    assert "did not hold: 256³: 0.389x" in note and "held: 256³: 1.86x" in note
    assert "now read on the device time" in note and "only the loop time" in note
    # the 1000² claim (below 1.1x) held on both: not listed
    assert "two 1000² fp32 matmuls" not in note
