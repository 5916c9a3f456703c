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
    ("streams", ["streams=0"], ["'streams'", "0", "from 1 to 1024"]),
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
    ("trial-order", ["trial_order=hot"], ["'trial_order'", "'hot'", "heat, plan"]),
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
    # a sweep without -m: the count and a short list, never 5000 values
    ("sweep-without-m", ["seed=range(0,5000)"], ["5000 jobs", "-m", "seed=[0,1,", ",...,4999]"]),
    ("experiment-name", ["experiment=nope"], ["'experiment'", "'nope'", "quickstart"]),
    ("experiment-malformed", ["--config-dir", "cd", "experiment=broken"],
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
     ["'op.target'", "nosuch", "Check the function's name"]),  # read or imported
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
    ("results-dir-proc", ["results_dir=/proc/opsweep"], ["'results_dir'", "/proc"]),
    ("sweep-id-long", ["sweep_id=" + "a" * 300], ["'sweep_id'", "300 bytes", "shorter"]),
    # numbers: finite and in range (nan would switch a limit off)
    ("nan-trial-timeout", ["trial_timeout_s=nan"], ["'trial_timeout_s'", "nan", "finite"]),
    ("nan-target-rel", ["timer.target_rel=nan"], ["'timer.target_rel'", "nan", "> 0"]),
    ("nan-max-time", ["timer.max_time_s=nan"], ["'timer.max_time_s'", "nan", "> 0"]),
    ("inf-warmup", ["timer.warmup_s=inf"], ["'timer.warmup_s'", "inf", "finite"]),
    ("nan-gpu-warmup", ["gpu_warmup_s=nan"], ["'gpu_warmup_s'", "nan", "seconds"]),
    ("energy-window-negative", ["energy_window_s=-3"], ["'energy_window_s'", "-3", "> 0"]),
    ("profile-calls-zero", ["profile_calls=0"], ["'profile_calls'", "0", ">= 1"]),
    ("op-flops-nan", ["op=custom", f"op.target={FINE}", "op.flops=nan"],
     ["'op.flops'", "nan", "finite"]),
    ("op-flops-negative", ["op=custom", f"op.target={FINE}", "op.flops=-0.5"],
     ["'op.flops'", "-0.5", ">= 0", "-1 (the default)"]),
    ("seed-int64", ["seed=9223372036854775808"], ["'seed'", "9223372036854775808", "int64"]),
    ("timer-preset-name", ["timer.preset=bogus"], ["'timer.preset'", "'bogus'", "quick"]),
    ("check-bool", ["check=maybe"], ["'check'", "'maybe'", "true, false"]),
    # empty lists: no trials
    ("empty-dtype", ["dtype=[]"], ["no trials", "dtype=[] is empty"]),
    ("empty-device", ["device=[]"], ["no trials", "device=[] is empty"]),
    ("empty-cases", ["cases=[]"], ["no trials", "cases=[] is empty"]),
    ("empty-op-param", ["op=batched_dot", "op.impl=[]"], ["no trials", "op.impl=[] is empty"]),
    # sweeps
    ("sweep-without-m", ["dtype=fp32,bf16"], ["dtype=fp32,bf16", "add -m", "dtype=[fp32,bf16]"]),
    ("multirun-bad-job", ["-m", "--config-dir", "cd", "op=vector_add", "shape=[8]",
                          "experiment=quickstart,no_package"],
     ["job 1", "experiment=no_package", "@package _global_"]),
    # experiment and op files (under --config-dir): Hydra's errors in opsweep's words
    ("experiment-expect-mapping", ["--config-dir", "cd", "experiment=expect_mapping"],
     ["expect", "{'claim': 'x'}", "list"]),
    ("experiment-pivot-key", ["--config-dir", "cd", "experiment=pivot_key"],
     ["pivots[0].nosuchkey", "Valid keys"]),
    ("experiment-rows-string", ["--config-dir", "cd", "experiment=rows_string"],
     ["pivots[0].rows", "'op'"]),
    ("experiment-unknown-key", ["--config-dir", "cd", "experiment=unknown_key"],
     ["unknown config key 'nosuchsetting'", "experiment/unknown_key.yaml"]),
    ("experiment-value-type", ["--config-dir", "cd", "experiment=value_type"],
     ["'smoke'", "'maybe'", "experiment/value_type.yaml"]),
    ("experiment-no-package", ["--config-dir", "cd", "experiment=no_package"],
     ["'experiment'", "dtype", "@package _global_"]),
    ("experiment-missing-op", ["--config-dir", "cd", "experiment=missing_op"],
     ["'op'", "'nosuchop'", "matmul"]),
    ("config-dir-unknown-key", ["--config-dir", "cd", "nosuch=1"],
     ["unknown config key 'nosuch'", "Valid keys"]),
    ("config-dir-missing", ["--config-dir", "nodir", "op=add"], ["'--config-dir'", "nodir"]),
    ("op-yaml-shape-names", ["--config-dir", "cd", "op=bad_names"],
     ["'op.shape_names'", "5", "[M, N, K]"]),
    ("op-target-import", ["op=custom", "op.target=broken_import:fn"],
     ["'op.target'", "broken_import", "nosuchdependency_xyz"]),
    ("experiment-sweeper-params", ["-m", "--config-dir", "cd", "experiment=sweeper_bad"],
     ["in experiment/sweeper_bad.yaml (hydra.sweeper.params)", "'dtype'", "'fp8'",
      "Fix the value in that file"]),
    ("experiment-bare-list", ["--config-dir", "cd", "experiment=bare_list"],
     ["'experiment'", "'bare_list'", "mapping"]),
    # look-alike characters: named, with their position and the fix
    ("unicode-digit", ["shape=[\uff18]"],
     ["'shape'", "U+FF18 FULLWIDTH DIGIT EIGHT", "character 8", "type '8' instead"]),
    ("unicode-dtype", ["dtype=fp\uff13\uff12"], ["'dtype'", "U+FF13", "character 9", "'3'"]),
    ("unicode-accent", ["op=m\u00e4tmul"], ["'op'", "U+00E4", "character 5", "type 'a'"]),
    ("unicode-zero-width", ["dtype=fp32\u200b"],
     ["'dtype'", "U+200B ZERO WIDTH SPACE", "character 11", "delete it"]),
    # brackets that do not pair up: the override named, not the grammar's "no viable ..."
    ("bracket-unclosed", ["dtype=[fp32,bf16"],
     ["'dtype=[fp32,bf16'", "unclosed '['", "quote the whole override"]),
    ("bracket-stray", ["dtype=fp32]"], ["'dtype=fp32]'", "']' that closes no bracket"]),
    ("output-subdir-null", ["hydra.output_subdir=null"],
     ["'hydra.output_subdir'", "None", "runner.resume", "Leave hydra.output_subdir out"]),
    ("results-dir-tilde", ["results_dir='~/x'"], ["'results_dir'", "'~/x'", "Write the path out"]),
    ("env-missing", ["results_dir=${oc.env:OPSWEEP_NO_SUCH_VARIABLE}"],
     ["'results_dir'", "OPSWEEP_NO_SUCH_VARIABLE", "export", "oc.env:NAME,fallback"]),
    ("streams-huge", ["streams=1000000"], ["'streams'", "1000000", "from 1 to 1024"]),
]

#: the files the catalog's cases read, made under each case's own tmp_path (``cd/`` is the
#: ``--config-dir``): a broken YAML, experiments that compose wrongly, a broken op YAML, and a
#: module whose import fails
FILES = {
    "cd/experiment/broken.yaml": "# @package _global_\ndtype: [fp32\nop: {a: b\n",
    "cd/experiment/expect_mapping.yaml": "# @package _global_\nexpect:\n  claim: x\n",
    "cd/experiment/pivot_key.yaml": "# @package _global_\npivots:\n  - rows: [op]\n"
                                    "    nosuchkey: 1\n",
    "cd/experiment/rows_string.yaml": "# @package _global_\npivots:\n  - rows: op\n"
                                      "    columns: [dtype]\n",
    "cd/experiment/unknown_key.yaml": "# @package _global_\nnosuchsetting: 3\n",
    "cd/experiment/value_type.yaml": "# @package _global_\nsmoke: maybe\n",
    "cd/experiment/no_package.yaml": "dtype: bf16\n",
    "cd/experiment/missing_op.yaml": "# @package _global_\ndefaults:\n"
                                     "  - override /op: nosuchop\n",
    "cd/op/bad_names.yaml": "_target_: ops.matmul.build\nname: bad_names\nshape_names: 5\n"
                            "default_shape: [8, 8, 8]\n",
    "cd/experiment/sweeper_bad.yaml": "# @package _global_\nhydra:\n  sweeper:\n    params:\n"
                                      "      dtype: fp32,fp8\n",
    "cd/experiment/bare_list.yaml": "- dtype: fp32\n- dtype: bf16\n",
    "broken_import.py": "import nosuchdependency_xyz\n\n\ndef fn(a, b):\n    return a + b\n",
}


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


@pytest.mark.fast_sample(every=5)
@pytest.mark.parametrize(("args", "words"), [(a, w) for _, a, w in CATALOG],
                         ids=[name for name, _, _ in CATALOG])
def test_bad_input_exits_2_with_a_precise_message_and_leaves_nothing(
        args: list[str], words: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "README.md").write_text("a file, not a folder\n")
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    before = _files(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m` puts the current folder first
    small = [] if any(a.startswith("timer=") for a in args) else SMALL  # no key twice
    code = _run_main(small + args, tmp_path, monkeypatch)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert err.startswith("opsweep: error:"), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, f"{word!r} not in: {err}"
    assert _files(tmp_path) == before, "a rejected run left files behind"


@pytest.mark.slow
def test_an_override_after_m_simply_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture) -> None:
    """argparse alone stops at the first override after a flag; opsweep reorders them."""
    code = _run_main(["op=vector_add", "-m", "dtype=fp32,fp64", "shape=[8]", "timer=smoke",
                      "isolation=none", "check_accuracy=false", "sweep_id=s"], tmp_path,
                     monkeypatch)
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "results" / "s" / "jobs").iterdir()) == ["0", "1"]


@pytest.mark.parametrize("raised", ["SystemExit(0)", "SystemExit('bye')", "KeyboardInterrupt"])
def test_an_op_that_raises_systemexit_or_keyboardinterrupt_is_an_error_row(
        run_one: Any, raised: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under isolation=none a trial runs in the driver: SystemExit(0) from an op used to end
    the sweep with exit 0 and no result file."""
    module = "quits_" + "".join(c for c in raised if c.isalnum())  # one module per case
    (tmp_path / f"{module}.py").write_text(f"def fn(a, b):\n    raise {raised}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    row = run_one("op=custom", f"op.target={module}:fn", "shape=[8,8]", "timer=smoke")
    assert row["status"] == "error", row
    assert raised.partition("(")[0] in row["reason"] and "end the sweep" in row["reason"]


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


def test_a_second_ctrl_c_still_stops_a_trial_that_runs_in_process(
        run_one: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the op's own KeyboardInterrupt becomes a row: the one the Ctrl-C handler raises
    (isolation=none, second Ctrl-C) still ends the sweep."""
    from runner.execution.interrupt import GracefulStop

    (tmp_path / "presses_ctrl_c.py").write_text(
        "import os, signal\n\n\ndef fn(a, b):\n    os.kill(os.getpid(), signal.SIGINT)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n    return a + b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with GracefulStop() as stop, pytest.raises(KeyboardInterrupt):
        run_one("op=custom", "op.target=presses_ctrl_c:fn", "shape=[8,8]", "timer=smoke")
    assert stop.count == 2


def test_a_key_given_twice_warns_and_the_last_runs(capsys: pytest.CaptureFixture) -> None:
    """``dtype=fp32 dtype=fp64``: Hydra keeps the last without a word; opsweep says so
    (a warning: scripts that append an override rely on the last one winning)."""
    from runner.config.commandline import parse_command_line

    cmd = parse_command_line(["dtype=fp32", "op=add", "dtype=fp64"])
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("opsweep: warning: 'dtype' is given twice on the command line")
    assert "'dtype=fp32', then 'dtype=fp64'" in err and "only the last runs" in err
    assert "dtype=[a,b]" in err and "dtype=a,b" in err
    assert cmd.last("dtype").value() == "fp64"
    parse_command_line(["dtype=fp32", "op=add"])
    assert capsys.readouterr().err == ""


def test_a_full_disk_while_hydra_writes_its_record_exits_1_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Hydra's own write of ``.hydra`` on a full disk was a traceback, and it left a folder
    with the lock and an empty config.yaml that neither ``runner.resume`` ("not a sweep
    folder") nor a rerun ("already exists") took. Now: exit 1 with what failed, the folder
    this start made is removed, and the same command runs once there is space."""
    import errno
    import os

    import hydra.core.utils as hydra_utils

    def full(cfg: Any, filename: str, output_dir: Path) -> None:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        (Path(output_dir) / filename).write_text("")  # as a full disk leaves it
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    before = _files(tmp_path)
    monkeypatch.setattr(hydra_utils, "_save_config", full)
    args = SMALL + ["op=vector_add", "shape=[8]", "sweep_id=full", "isolation=none"]
    code = _run_main(args, tmp_path, monkeypatch)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1, err
    assert err.startswith("opsweep: error: could not write Hydra's record of the job"), err
    assert "No space left on device" in err and "Traceback" not in err
    assert "run the same command again" in err
    assert _files(tmp_path) == before, "a failed start left files behind"
    monkeypatch.undo()  # space again: the same command runs
    assert _run_main(args, tmp_path, monkeypatch) == 0, capsys.readouterr().err
    assert (tmp_path / "results" / "full" / "results.parquet").is_file()


def test_a_folder_in_place_of_results_parquet_is_named_by_collect_with_the_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The run's merge fails on it and says to retry with collect; collect used to fail the
    same way. Now it says what is in the way and how to move it, and leaves it as it was."""
    from runner.execution.collect import main as collect

    sweep = tmp_path / "results" / "s"
    (sweep / "jobs" / "0").mkdir(parents=True)
    (sweep / "results.parquet").mkdir()
    before = _files(tmp_path)
    assert collect([str(sweep)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"{sweep / 'results.parquet'} is a folder, not a results file" in err
    assert f"mv {sweep / 'results.parquet'} {sweep / 'results.parquet'}.folder" in err
    assert f"python -m runner.collect {sweep} again" in err
    assert _files(tmp_path) == before


def test_an_empty_shard_exits_0_with_one_line_and_makes_no_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """An array job may have more tasks than trials: the spare task is no error, but it
    says so in one line, and leaves neither a sweep folder nor a lock behind."""
    before = _files(tmp_path)
    code = _run_main(SMALL + ["op=vector_add", "shape=[8]", "shard=1", "num_shards=2"],
                     tmp_path, monkeypatch)
    err = capsys.readouterr().err.strip()
    assert code == 0, err
    assert err == ("opsweep: nothing to run: shard 1 of 2 has no trials (shard i runs the "
                   "trials whose index is i modulo num_shards); no sweep folder made.")
    assert _files(tmp_path) == before
