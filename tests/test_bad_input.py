"""The bad-input catalog (docs/errors.md): each kind is rejected before any trial runs, with
exit status 2, a message that names the key, the value and the fix, and nothing on disk.

Each case runs ``python -m runner``'s ``main()`` in-process (in a temporary working folder)
so the catalog stays fast; ``tests/test_e2e.py`` covers the real subprocess.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

FINE = "ops.examples:gelu_mul"
SMALL = ["timer=smoke"]

#: (id, overrides, words the message must contain)
CATALOG: list[tuple[str, list[str], list[str]]] = [
    # axes (README "Axes")
    ("dtype", ["dtype=fp8"], ["'dtype'", "'fp8'", "bf16"]),
    ("device-kind", ["device=tpu"], ["'device'", "'tpu'", "cpu"]),
    ("device-missing", ["device=cuda:7"], ["'device'", "'cuda:7'"]),
    ("seed", ["seed=-1"], ["'seed'", "-1", ">= 0"]),
    ("num-threads-zero", ["num_threads=0"], ["'num_threads'", "0", ">= 1"]),
    ("num-threads-machine", ["num_threads=100000"], ["'num_threads'", "100000", "logical CPUs"]),
    ("streams", ["streams=0"], ["'streams'", "0"]),
    ("graph", ["graph=full"], ["'graph'", "'full'", "cuda_graph"]),
    ("compile", ["compile=fast"], ["'compile'", "'fast'", "max-autotune"]),
    ("compile-dynamic", ["compile_dynamic=maybe"], ["'compile_dynamic'", "'maybe'", "null"]),
    ("fullgraph", ["fullgraph=yes"], ["'fullgraph'", "'yes'", "true"]),
    ("backward", ["backward=2"], ["'backward'", "2", "false"]),
    # shapes
    ("shape-rank", ["op=matmul", "shape=[8,8]"], ["'shape'", "[8, 8]", "rank"]),
    ("shape-sign", ["op=matmul", "shape=[8,-8,8]"], ["'shape'", "-8", "positive"]),
    ("shape-type", ["op=matmul", "shape=[a,b,c]"], ["'shape'", "'a'"]),
    ("shape-scalar", ["op=matmul", "shape=512"], ["'shape'", "512", "list"]),
    ("shape-numel-int64", ["op=matmul", "shape=[1000000000,1000000000,1000000000]"],
     ["'shape'", "1000000000", "smaller"]),
    ("shape-flops-int64", ["op=matmul", "shape=[3000000000,3000000000,16]"],
     ["'shape'", "3000000000", "smaller"]),
    # top-level settings (README "Settings")
    ("smoke", ["smoke=maybe"], ["'smoke'", "'maybe'", "true, false"]),
    ("check-accuracy", ["check_accuracy=perhaps"], ["'check_accuracy'", "'perhaps'", "true"]),
    ("store-calibration", ["store_calibration=1"], ["'store_calibration'", "1", "true"]),
    ("gpu-warmup-negative", ["gpu_warmup_s=-5"], ["'gpu_warmup_s'", "-5", ">= 0"]),
    ("gpu-warmup-type", ["gpu_warmup_s=hot"], ["'gpu_warmup_s'", "'hot'", "seconds"]),
    ("isolation", ["isolation=thread"], ["'isolation'", "'thread'", "process, none"]),
    ("trial-timeout", ["trial_timeout_s=-1"], ["'trial_timeout_s'", "-1", ">= 0"]),
    ("workers-zero", ["workers=0"], ["'workers'", "0", "per_gpu"]),
    ("workers-word", ["workers=all"], ["'workers'", "'all'", "per_gpu"]),
    ("workers-in-process", ["workers=2", "isolation=none"],
     ["'workers'", "isolation=none", "isolation=process"]),
    ("sweep-id-path", ["sweep_id=a/b"], ["'sweep_id'", "'a/b'", "folder name"]),
    ("unknown-key", ["dtypes=fp32"], ["'dtypes'", "Did you mean 'dtype'"]),
    ("cases", ["cases=5"], ["'cases'", "5", "list of mappings"]),
    # config groups
    ("op-name", ["op=matmull"], ["'op'", "'matmull'", "matmul"]),
    ("timer-preset", ["timer=fastest"], ["'timer'", "'fastest'", "quick"]),
    ("experiment-name", ["experiment=nope"], ["'experiment'", "'nope'", "quickstart"]),
    ("experiment-malformed", ["hydra.searchpath=[file:///tmp/badexp]", "experiment=broken"],
     ["'experiment'", "'broken'", "broken.yaml", "not valid YAML"]),
    # timer (README "Timer")
    ("timer-key", ["timer.warmups=3"], ["'timer.warmups'", "timer.warmup_calls"]),
    ("timer-type", ["timer.target_rel=tight"], ["'timer.target_rel'", "'tight'", "number"]),
    ("timer-clock", ["timer.clock=wall"], ["'timer.clock'", "'wall'", "event, host"]),
    ("timer-warmup-calls", ["timer.warmup_calls=-1"], ["'timer.warmup_calls'", "-1", ">= 0"]),
    ("timer-warmup-s", ["timer.warmup_s=-0.5"], ["'timer.warmup_s'", "-0.5", ">= 0"]),
    ("timer-min-max", ["timer.min_samples=50", "timer.max_samples=10"],
     ["min_samples", "50", "max_samples", "10"]),
    ("timer-batch", ["timer.batch_below_us=500", "timer.batch_target_us=100"],
     ["batch_below_us", "500", "batch_target_us", "100"]),
    ("timer-flush-host", ["timer.flush_l2=true", "timer.clock=host"],
     ["flush_l2", "clock", "host"]),
    # op parameters and user functions
    ("op-param-unknown", ["op=matmul", "op.bias=true"], ["'op.bias'", "matmul"]),
    ("op-param-choice", ["op=copy", "op.direction=sideways"],
     ["'op.direction'", "'sideways'", "d2d"]),
    ("op-param-negative", ["op=pointwise_chain", "op.iterations=-5"],
     ["'op.iterations'", "-5", ">= 1"]),
    ("op-target-module", ["op=custom", "op.target=nosuchmodule:fn"],
     ["'op.target'", "nosuchmodule", "PYTHONPATH"]),
    ("op-target-function", ["op=custom", "op.target=ops.examples:nosuch"],
     ["'op.target'", "nosuch", "defines no"]),
    ("op-target-not-callable", ["op=custom", "op.target=ops.custom:AUTO"],
     ["'op.target'", "ops.custom:AUTO", "not a callable"]),
    ("op-target-double-colon", ["op=custom", "op.target=ops.examples::gelu_mul"],
     ["'op.target'", "::", "pkg.module:function"]),
    ("op-target-empty", ["op=custom", "op.target="], ["'op.target'", "pkg.module:function"]),
    ("op-target-signature", ["op=custom", "op.target=ops.examples:gelu_mul", "op.n_inputs=3"],
     ["'op.target'", "gelu_mul", "n_inputs=3"]),
    ("op-target-in-multirun", ["-m", "op=custom", f"op.target={FINE},ops.examples:nosuch"],
     ["'op.target'", "nosuch"]),
    ("op-builder", ["op=custom", "op._target_=ops.custom.nobuild"],
     ["'op._target_'", "Parameters of op 'custom'"]),
    # where results go
    ("results-dir-file", ["results_dir=README.md/x"], ["'results_dir'", "not a directory"]),
]


def _run_main(args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    import runpy

    from hydra.core.global_hydra import GlobalHydra

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["runner", *args])
    GlobalHydra.instance().clear()
    try:
        # as `python -m runner` does: run as __main__, so Hydra finds conf/ next to it
        runpy.run_module("runner", run_name="__main__", alter_sys=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        GlobalHydra.instance().clear()
    return 0


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(("args", "words"), [(a, w) for _, a, w in CATALOG],
                         ids=[name for name, _, _ in CATALOG])
def test_bad_input_exits_2_with_a_precise_message_and_leaves_nothing(
        args: list[str], words: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "README.md").write_text("a file, not a folder\n")
    code = _run_main(SMALL + args, tmp_path, monkeypatch)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert err.startswith("opsweep: error:"), err
    for word in words:
        assert word in err, f"{word!r} not in: {err}"
    assert _files(tmp_path) == ["README.md"], "a rejected run left files behind"


def test_catalog_has_at_least_30_kinds_and_is_documented() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "errors.md").read_text()
    assert len(CATALOG) >= 30
    for name, _, _ in CATALOG:
        assert f"`{name}`" in doc, f"docs/errors.md does not list {name}"


def test_a_clashing_sweep_id_is_refused_before_any_trial_and_keeps_provenance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    sweep = tmp_path / "results" / "fixed" / "jobs" / "0" / ".hydra"
    sweep.mkdir(parents=True)
    (sweep / "config.yaml").write_text("original: true\n")
    code = _run_main(SMALL + ["op=vector_add", "shape=[8]", "sweep_id=fixed"], tmp_path,
                     monkeypatch)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "'sweep_id'" in err and "'fixed'" in err and "runner.resume" in err
    assert (sweep / "config.yaml").read_text() == "original: true\n"
    assert _files(tmp_path / "results" / "fixed") == [
        "jobs", "jobs/0", "jobs/0/.hydra", "jobs/0/.hydra/config.yaml"]


@pytest.mark.parametrize("target", ["ops.faults:returns_none", "ops.faults:returns_int"])
def test_a_function_that_returns_no_tensor_is_an_error_row(run_one: Any, target: str) -> None:
    """Only calling it shows what a function returns: the row is ``error``, never ``ok``."""
    row = run_one("op=custom", f"op.target={target}", "shape=[8,8]", "timer=smoke")
    assert row["status"] == "error", row["reason"]
    assert "returned no tensor" in row["reason"]
