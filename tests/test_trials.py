"""Trial expansion: ``runner.config.trials`` and ``runner.config.planner.plan_job`` on composed
configs.

The rule: a flat shape is one shape, a list of shapes is one trial each; every other axis
and every op parameter expands a list into one trial per element; the trials are the
cartesian product in ``runner.core.axes.AXES`` order, then op parameters, last varying fastest.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runner.config.planner import expand
from runner.config.trials import TrialSpec, as_choices, shape_choices
from runner.core.axes import AXIS_NAMES as AXES
from runner.core.axes import CompileMode, DType, GraphMode
from runner.core.errors import ConfigError

MATMUL_512_FP32_CPU = TrialSpec(
    op="matmul", target="ops.matmul.build", shape=(512, 512, 512), dtype=DType.fp32,
    device="cpu", seed=0, num_threads=None, streams=1, graph=GraphMode.none,
    compile=CompileMode.none, compile_dynamic=None, fullgraph=False, backward=False)
#: sha256 of the canonical JSON of MATMUL_512_FP32_CPU, first 16 hex digits. If this changes,
#: every stored trial_id stops matching new runs: change it only on purpose.
MATMUL_512_FP32_CPU_ID = "b69876c98d1ea5e4"


@pytest.fixture(scope="module")
def specs(compose: Any, plan_trials: Any) -> Any:
    def specs(*overrides: str) -> list[TrialSpec]:
        return [spec for _, spec in plan_trials(compose(*overrides))]
    return specs


# ---------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------

def test_list_of_shapes_is_one_trial_per_shape(specs: Any) -> None:
    out = specs("op=matmul", "shape=[[512,512,512],[1024,1024,1024]]")
    assert [s.shape for s in out] == [(512, 512, 512), (1024, 1024, 1024)]


def test_flat_shape_is_one_trial(specs: Any) -> None:
    out = specs("op=matmul", "shape=[512,512,512]")
    assert [s.shape for s in out] == [(512, 512, 512)]


def test_null_shape_is_the_ops_default_shape(specs: Any) -> None:
    out = specs("op=matmul")
    assert [s.shape for s in out] == [(1024, 1024, 1024)]  # conf/op/matmul.yaml


def test_shape_choices_and_as_choices() -> None:
    assert shape_choices([4, 5]) == [(4, 5)]
    assert shape_choices([[4, 5], [6, 7]]) == [(4, 5), (6, 7)]
    assert as_choices("fp32") == ["fp32"]
    assert as_choices(["fp32", "bf16"]) == ["fp32", "bf16"]
    assert as_choices(None) == [None]


# ---------------------------------------------------------------------------------------
# Products and order
# ---------------------------------------------------------------------------------------

def test_dtype_list_times_shape_list_is_cartesian_shape_outer(specs: Any) -> None:
    out = specs("op=matmul", "dtype=[fp32,bf16]", "shape=[[512,512,512],[1024,1024,1024]]")
    assert [(s.shape[0], s.dtype.value) for s in out] == [
        (512, "fp32"), (512, "bf16"), (1024, "fp32"), (1024, "bf16")]


def test_axes_order_is_schema_order_last_fastest(specs: Any) -> None:
    out = specs("op=matmul", "shape=[8,8,8]", "dtype=[fp32,fp64]", "seed=[0,1]",
                "backward=[false,true]", "device=cpu")
    assert len(out) == 8
    # shape, dtype, ..., seed, ..., backward: backward varies fastest, dtype slowest
    assert [(s.dtype.value, s.seed, s.backward) for s in out] == [
        (d, seed, b) for d in ("fp32", "fp64") for seed in (0, 1) for b in (False, True)]
    assert AXES.index("dtype") < AXES.index("seed") < AXES.index("backward")


def test_op_param_list_expands(specs: Any) -> None:
    out = specs("op=batched_dot", "op.impl=[mul_sum,bmm]", "shape=[8,8]")
    assert [s.params_dict["impl"] for s in out] == ["mul_sum", "bmm"]
    assert all(s.op == "batched_dot" and s.target == "ops.batched_dot.build" for s in out)
    assert len({s.trial_id for s in out}) == 2


def test_op_params_vary_after_the_axes(specs: Any) -> None:
    out = specs("op=batched_dot", "op.impl=[mul_sum,bmm]", "dtype=[fp32,bf16]", "shape=[8,8]")
    assert [(s.dtype.value, s.params_dict["impl"]) for s in out] == [
        ("fp32", "mul_sum"), ("fp32", "bmm"), ("bf16", "mul_sum"), ("bf16", "bmm")]


def test_scalar_op_param_is_recorded(specs: Any) -> None:
    (spec,) = specs("op=mlp", "shape=[4,8]", "op.layers=2")
    assert spec.params_dict == {"layers": 2, "activation": "gelu"}
    assert spec.params == (("activation", "gelu"), ("layers", 2))  # sorted by name


def test_expand_directly() -> None:
    axes = {name: [getattr(MATMUL_512_FP32_CPU, name)] for name in AXES}
    axes["dtype"] = [DType.fp32, DType.bf16]
    out = expand(axes, {"impl": ["a", "b"]}, op="matmul", target="ops.matmul.build")
    assert [(s.dtype, s.params) for s in out] == [
        (DType.fp32, (("impl", "a"),)), (DType.fp32, (("impl", "b"),)),
        (DType.bf16, (("impl", "a"),)), (DType.bf16, (("impl", "b"),))]


# ---------------------------------------------------------------------------------------
# Duplicates
# ---------------------------------------------------------------------------------------

def test_duplicate_axis_values_collapse(specs: Any) -> None:
    out = specs("op=matmul", "dtype=[fp32,bf16,fp32]", "shape=[[8,8,8],[16,16,16],[8,8,8]]")
    assert [(s.shape[0], s.dtype.value) for s in out] == [
        (8, "fp32"), (8, "bf16"), (16, "fp32"), (16, "bf16")]


def test_aliases_that_resolve_to_one_device_collapse(specs: Any) -> None:
    import torch

    if torch.cuda.is_available():
        out = specs("op=matmul", "shape=[8,8,8]", "device=[auto,cuda,cuda:0]")
        assert [s.device for s in out] == ["cuda:0"]
    else:
        out = specs("op=matmul", "shape=[8,8,8]", "device=[auto,cpu]")
        assert [s.device for s in out] == ["cpu"]


def test_duplicate_op_param_values_collapse(specs: Any) -> None:
    out = specs("op=batched_dot", "op.impl=[bmm,mul_sum,bmm]", "shape=[8,8]")
    assert [s.params_dict["impl"] for s in out] == ["bmm", "mul_sum"]


def test_trial_ids_are_unique_within_a_job(specs: Any) -> None:
    out = specs("op=matmul", "dtype=[fp32,bf16,fp16]", "shape=[[8,8,8],[16,16,16]]",
                "seed=[0,1]", "device=cpu")
    assert len(out) == 12
    assert len({s.trial_id for s in out}) == 12


# ---------------------------------------------------------------------------------------
# trial_id
# ---------------------------------------------------------------------------------------

def test_trial_id_is_pinned() -> None:
    assert MATMUL_512_FP32_CPU.trial_id == MATMUL_512_FP32_CPU_ID


def test_trial_id_of_a_composed_config_is_pinned(specs: Any) -> None:
    (spec,) = specs("op=matmul", "shape=[512,512,512]", "dtype=fp32", "device=cpu")
    assert spec == MATMUL_512_FP32_CPU
    assert spec.trial_id == MATMUL_512_FP32_CPU_ID


def test_trial_id_is_stable_across_processes() -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("from runner.config.trials import TrialSpec; from runner.core.axes import *; "
            "print(TrialSpec('matmul','ops.matmul.build',(512,512,512),DType.fp32,'cpu',0,"
            "None,1,GraphMode.none,CompileMode.none,None,False,False).trial_id)")
    path = os.pathsep.join(p for p in (str(Path(__file__).resolve().parent.parent),
                                       os.environ.get("PYTHONPATH", "")) if p)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": path, "PYTHONHASHSEED": "12345"},
                         check=True)
    assert out.stdout.strip() == MATMUL_512_FP32_CPU_ID


ALTERED: dict[str, Any] = {
    "op": "matmul2", "target": "ops.matmul.build2", "shape": (512, 512, 256),
    "dtype": DType.bf16, "device": "cuda:0", "seed": 1, "num_threads": 4, "streams": 2,
    "graph": GraphMode.cuda_graph, "compile": CompileMode.default, "compile_dynamic": False,
    "fullgraph": True, "backward": True, "params": (("impl", "bmm"),),
}


def test_every_field_is_covered_by_the_altered_values() -> None:
    assert set(ALTERED) == {f.name for f in dataclasses.fields(TrialSpec)}


@pytest.mark.parametrize("field", sorted(ALTERED))
def test_trial_id_changes_when_any_field_changes(field: str) -> None:
    changed = dataclasses.replace(MATMUL_512_FP32_CPU, **{field: ALTERED[field]})
    assert changed.trial_id != MATMUL_512_FP32_CPU_ID
    assert len(changed.trial_id) == 16 and int(changed.trial_id, 16) >= 0


def test_trial_id_tells_shapes_apart_that_join_the_same() -> None:
    a = dataclasses.replace(MATMUL_512_FP32_CPU, shape=(51, 2))
    b = dataclasses.replace(MATMUL_512_FP32_CPU, shape=(5, 12))
    assert a.trial_id != b.trial_id


def test_trial_id_ignores_param_order() -> None:
    a = dataclasses.replace(MATMUL_512_FP32_CPU, params=(("a", 1), ("b", 2)))
    b = dataclasses.replace(MATMUL_512_FP32_CPU, params=(("b", 2), ("a", 1)))
    assert a.trial_id == b.trial_id


def test_label() -> None:
    spec = dataclasses.replace(MATMUL_512_FP32_CPU, streams=2, graph=GraphMode.cuda_graph,
                               compile=CompileMode.default, backward=True,
                               params=(("impl", "bmm"),))
    assert spec.label() == ("matmul fp32 512x512x512 impl=bmm streams=2 graph=cuda_graph "
                            "compile=default backward=true")
    assert MATMUL_512_FP32_CPU.label() == "matmul fp32 512x512x512"


# ---------------------------------------------------------------------------------------
# plan_job rejects what expansion cannot use
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("overrides", "needles"), [
    (("op=matmul", "shape=[8,8]"), ["'shape'", "rank 2", "M, N, K"]),
    (("op=matmul", "shape=[[8,8,8],[8,0,8]]"), ["'shape'", "positive"]),
    (("op=matmul", "dtype=[fp32,fp61]"), ["'dtype'", "fp61", "bf16"]),
    (("op=matmul", "streams=0"), ["'streams'", "from 1 to 1024"]),
    (("op=matmul", "graph=cudagraph"), ["'graph'", "cuda_graph"]),
    (("op=matmul", "compile=[default,fast]"), ["'compile'", "reduce-overhead"]),
    (("op=matmul", "backward=maybe"), ["'backward'", "true, false"]),
    (("op=batched_dot", "op.impl=fast"), ["'op.impl'", "mul_sum, bmm, einsum"]),
    (("op=mlp", "op.layers=two"), ["'op.layers'", "integer"]),
    (("op=batched_dot", "+op.foo=1"), ["foo", "impl"]),
])
def test_plan_job_rejects_bad_values(compose: Any, plan_trials: Any, overrides: tuple,
                                     needles: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        plan_trials(compose(*overrides))
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))
