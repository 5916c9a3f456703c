"""Every shipped config composes, validates and (for ops) runs on a CPU at a tiny shape.

New files under ``conf/op``, ``conf/timer`` and ``conf/experiment`` are picked up by the
glob, so a config added without a working op, or a preset with bad bounds, fails here.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from runner.config.ops import builder_params, resolve_target, target_params
from runner.config.schema import RunConfig
from runner.storage.columns import COLUMNS
from runner.storage.files import rows_to_table
from runner.timing.measurement import TimerPlan

CONF = Path(__file__).resolve().parent.parent / "conf"
OPS = sorted(p.stem for p in (CONF / "op").glob("*.yaml"))
TIMERS = sorted(p.stem for p in (CONF / "timer").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
SMOKE_SUPPORTED = "smoke" in {f.name for f in dataclasses.fields(RunConfig)}

#: Shapes that "every size 4" does not fit (kernel must fit the padded image, etc.).
TINY_SHAPE: dict[str, list[int]] = {
    "conv2d": [2, 3, 8, 8, 4, 3],
    "copy_compute_overlap": [8, 4, 2],
    "monte_carlo_pi": [1000],
    "sdpa": [1, 2, 8, 4],
}
#: Op parameters a tiny CPU run needs.
EXTRA: dict[str, list[str]] = {
    "custom": ["op.target=ops.examples:gelu_mul"],
}
#: Ops that cannot run on a CPU: the row must be skipped, with this in its reason.
CPU_SKIPPED: dict[str, str] = {"copy_compute_overlap": "cpu"}
#: Ops without a reference or accuracy function: accuracy_ok is None.
NO_REFERENCE = {"alloc", "tensor_create"}


def op_yaml(name: str) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.load(CONF / "op" / f"{name}.yaml"))


def tiny_shape(name: str) -> list[int]:
    if name in TINY_SHAPE:
        return TINY_SHAPE[name]
    names = op_yaml(name).get("shape_names")
    return [4] * len(names) if names else [4, 4]


def shape_arg(shape: list[int]) -> str:
    return "shape=[" + ",".join(str(s) for s in shape) + "]"


# ---------------------------------------------------------------------------------------
# conf/op
# ---------------------------------------------------------------------------------------

def test_there_are_configs_to_test() -> None:
    assert "matmul" in OPS and "smoke" in TIMERS and "quickstart" in EXPERIMENTS


@pytest.mark.parametrize("name", OPS)
def test_op_parameters_read_from_source_match_the_imported_builder(name: str) -> None:
    """The driver reads a shipped op's parameters from its source (no torch import): they must
    be exactly what importing the builder gives, so its checks are as strict."""
    target = op_yaml(name)["_target_"]
    builder, static = target_params(target)
    assert builder is None, f"{target}: its parameters should be readable without importing it"
    assert static == builder_params(resolve_target(target))


@pytest.mark.parametrize("name", OPS)
def test_op_yaml_is_well_formed(name: str) -> None:
    node = op_yaml(name)
    assert node["name"] == name, "an op's name must match its file, or op=<name> lies"
    assert node["_target_"].startswith("ops.")
    default = node.get("default_shape")
    names = node.get("shape_names")
    assert default, f"{name} has no default_shape"
    if names:
        assert len(default) == len(names), f"default_shape does not fit {names}"


@pytest.mark.parametrize("name", OPS)
def test_op_composes_and_plans_at_its_default_shape(compose: Any, plan_trials: Any,
                                                    name: str) -> None:
    trials = plan_trials(compose(f"op={name}", *EXTRA.get(name, [])))
    assert len(trials) == 1
    plan, spec = trials[0]
    assert plan.name == spec.op == name
    assert list(spec.shape) == op_yaml(name)["default_shape"]


@pytest.fixture(scope="module")
def op_rows(run_one: Any) -> dict[str, dict[str, Any]]:
    """One CPU trial of every op at its tiny shape (module-scoped: run once, checked often)."""
    return {name: run_one(f"op={name}", shape_arg(tiny_shape(name)), "device=cpu",
                          "timer=smoke", *EXTRA.get(name, []))
            for name in OPS}


@pytest.mark.parametrize("name", OPS)
def test_op_runs_on_cpu_at_a_tiny_shape(op_rows: dict[str, dict[str, Any]], name: str) -> None:
    row = op_rows[name]
    if name in CPU_SKIPPED:
        assert row["status"] == "skipped", (row["status"], row["reason"])
        assert CPU_SKIPPED[name] in row["reason"]
        return
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["reason"] is None and row["error_traceback"] is None
    assert row["op"] == name and row["shape"] == tiny_shape(name)
    # It measured: at least one sample, at most the smoke timer's 3. A loaded machine may
    # reach max_time_s (0.2 s) first; then the row says so, never a number as if complete.
    assert 1 <= row["n_samples"] <= 3 and len(row["samples_us"]) == row["n_samples"]
    assert row["n_samples"] == 3 or (row["noisy"] and "min_samples" in row["noisy_reason"])
    assert row["time_median_us"] > 0 and math.isfinite(row["time_median_us"])
    assert row["bytes_moved"] is None or row["bytes_moved"] >= 0
    if name in NO_REFERENCE:
        assert row["accuracy_ok"] is None and row["rel_error"] is None
    else:
        assert row["accuracy_ok"] is True, (row["rel_error"], row["rel_error_tol"])


def test_op_rows_make_a_typed_table(op_rows: dict[str, dict[str, Any]]) -> None:
    """Every value an op produced fits its column's declared type (no silent fallback to
    strings, which ``rows_to_table`` does for values of the wrong type)."""
    table = rows_to_table(list(op_rows.values()), {})
    for field in table.schema:
        if field.name in COLUMNS:
            assert str(field.type) == COLUMNS[field.name][0], field.name


@pytest.mark.parametrize(("overrides", "needle"), [
    (("op=copy", "shape=[16]", "op.direction=h2d"), "cpu"),
    (("op=copy", "shape=[16]", "op.direction=d2h"), "cpu"),
    (("op=copy", "shape=[16]", "op.pinned=true"), "pinned"),
    (("op=tensor_create", "shape=[4,4]", "op.where=host_then_copy"), "cpu"),
    (("op=cpu_roundtrip", "shape=[4,4]", "op.where=host", "dtype=bf16"), "bfloat16"),
])
def test_cpu_unsupported_variants_are_skipped(run_one: Any, overrides: tuple,
                                              needle: str) -> None:
    row = run_one(*overrides, "device=cpu", "timer=smoke")
    assert row["status"] == "skipped", (row["status"], row["reason"])
    assert needle in row["reason"]


def test_copy_d2d_runs_on_cpu(run_one: Any) -> None:
    row = run_one("op=copy", "shape=[1024]", "op.direction=d2d", "device=cpu", "timer=smoke")
    assert row["status"] == "ok" and row["accuracy_ok"] is True
    assert row["bytes_moved"] == 2 * 1024 * 4


# ---------------------------------------------------------------------------------------
# conf/timer
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TIMERS)
def test_timer_preset_composes_into_a_valid_plan(compose: Any, name: str) -> None:
    cfg = compose(f"timer={name}")
    assert cfg.timer.preset == name
    plan = TimerPlan.from_settings(cfg.timer)
    assert plan.min_samples <= plan.max_samples
    assert cfg.timer.clock in ("event", "host")


def test_smoke_timer_is_small(compose: Any) -> None:
    plan = TimerPlan.from_settings(compose("timer=smoke").timer)
    assert plan.max_samples <= 5 and plan.max_time_s <= 1.0


def test_default_timer_is_the_default(compose: Any) -> None:
    assert compose().timer.preset == "default"


# ---------------------------------------------------------------------------------------
# conf/experiment (running them end to end is in test_e2e.py)
# ---------------------------------------------------------------------------------------

@pytest.mark.fast_sample(every=6)
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes_and_plans(compose: Any, plan_trials: Any, name: str) -> None:
    trials = plan_trials(compose(f"experiment={name}"))
    assert trials, f"experiment {name} expands into no trials"
    assert len({spec.trial_id for _, spec in trials}) == len(trials), "duplicate trials"


@pytest.mark.fast_sample(every=6)
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_has_a_smoke_size(compose: Any, plan_trials: Any, name: str) -> None:
    if not SMOKE_SUPPORTED:
        pytest.skip(f"no smoke size preset yet: experiments {', '.join(EXPERIMENTS)} run "
                    "only at full size (the experiments issue adds smoke sizes)")
    trials = plan_trials(compose(f"experiment={name}", "smoke=true"))
    assert trials
    for _, spec in trials:
        assert max(spec.shape) <= 64, f"{spec.label()} is not small under smoke=true"


def test_the_cpu_quickstart_fits_a_cpu(compose: Any, plan_trials: Any) -> None:
    """What ``make run`` runs without a GPU: dtypes every CPU computes at full speed, one
    thread, sizes a core finishes in milliseconds; still two dtypes and a size curve to read."""
    cfg = compose("experiment=quickstart_cpu")
    specs = [spec for _, spec in plan_trials(cfg)]
    assert {spec.device for spec in specs} == {"cpu"}
    assert {spec.num_threads for spec in specs} == {1}
    assert {spec.dtype for spec in specs} == {"fp32", "fp64"}
    assert len({spec.shape for spec in specs}) >= 3
    assert max(math.prod(spec.shape) for spec in specs) <= 512 ** 3
    assert cfg.timer.preset == "quick"
