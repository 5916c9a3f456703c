"""Unit tests of the op catalog (``ops/*.py``) and its configs (``conf/op/*.yaml``), on CPU.

Every op is built through its YAML (so the YAML and the builder are tested together) at a
tiny shape, called once and compared with its float64 reference in the runner's order
(reference first, then one call). FLOP and byte counts are checked against numbers worked
out by hand, so a broken formula fails here and not in a sweep's roofline.
"""

from __future__ import annotations

import importlib
import inspect
import math
import typing
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from ops.base import OpContext, TrialSkipped, Workload, relative_error
from ops.custom import resolve_target

CONF_OP = Path(__file__).resolve().parent.parent / "conf" / "op"
RESERVED = {"_target_", "name", "shape_names", "default_shape", "description"}
YAML_NAMES = sorted(p.stem for p in CONF_OP.glob("*.yaml"))

#: A tiny shape per op: every YAML must have one (test_every_yaml_has_a_tiny_shape).
TINY: dict[str, tuple[int, ...]] = {
    "matmul": (5, 6, 7), "bmm": (2, 3, 4, 5), "batched_dot": (6, 7), "linear": (4, 5, 6),
    "add": (3, 4), "mul": (3, 4), "vector_add": (10,), "pointwise_chain": (5,),
    "sum": (7, 9), "copy": (100,), "custom": (3, 4), "mlp": (4, 8),
    "copy_compute_overlap": (8, 4, 2), "monte_carlo_pi": (100_000,), "matvec": (20, 5),
    "tensor_create": (4, 5), "alloc": (8, 6), "cpu_roundtrip": (10, 10),
    "conv2d": (2, 3, 6, 6, 4, 3), "sdpa": (2, 2, 8, 4), "softmax": (4, 9),
    "layer_norm": (4, 9), "matrix_power": (8,), "projection": (12, 4),
    "varying_inputs": (8, 3),
}

FP32 = 4  # bytes per element in the hand-computed byte counts below


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------

def load_yaml(name: str) -> dict[str, Any]:
    cfg = OmegaConf.to_container(OmegaConf.load(CONF_OP / f"{name}.yaml"))
    assert isinstance(cfg, dict)
    return cfg


def resolve(dotted: str) -> Any:
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def make_ctx(shape: tuple[int, ...], dtype: torch.dtype = torch.float32, seed: int = 0,
             device: str = "cpu") -> OpContext:
    return OpContext(shape=shape, dtype=dtype, device=torch.device(device),
                     generator=torch.Generator(device=device).manual_seed(seed), seed=seed,
                     dtype_name=str(dtype).split(".")[-1])


def build(name: str, shape: tuple[int, ...] | None = None,
          dtype: torch.dtype = torch.float32, seed: int = 0, device: str = "cpu",
          **overrides: Any) -> Workload:
    """Build op ``name`` the way the runner does: the YAML's params, then the overrides."""
    cfg = load_yaml(name)
    params = {k: v for k, v in cfg.items() if k not in RESERVED} | overrides
    ctx = make_ctx(TINY[name] if shape is None else shape, dtype, seed, device)
    workload = resolve(cfg["_target_"])(ctx, **params)
    assert isinstance(workload, Workload)
    return workload


def error_of(workload: Workload) -> float:
    """The runner's accuracy check: reference from the inputs as they are, then one call.

    The device is synchronised before comparing: an op may write host memory asynchronously
    (a pinned d2h copy), and reading it earlier would compare a half-written buffer.
    """
    with torch.no_grad():
        reference = workload.reference() if workload.reference is not None else None
    output = workload.fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    if workload.accuracy is not None:
        return workload.accuracy(output)
    assert reference is not None, "op has neither a reference nor an accuracy function"
    return relative_error(output, reference)


def grad_leaves(workload: Workload) -> list[torch.Tensor]:
    leaves = [t for t in workload.inputs if t.is_floating_point()]
    if workload.module is not None:
        leaves += list(workload.module.parameters())
    return leaves


# ---------------------------------------------------------------------------------------
# Every op against its float64 reference
# ---------------------------------------------------------------------------------------

CHECKED: list[tuple[str, dict[str, Any]]] = [
    ("matmul", {}), ("bmm", {}),
    ("batched_dot", {"impl": "mul_sum"}), ("batched_dot", {"impl": "bmm"}),
    ("batched_dot", {"impl": "einsum"}),
    ("linear", {"bias": False}), ("linear", {"bias": True}),
    ("add", {"inplace": False}), ("add", {"inplace": True}),
    ("mul", {"inplace": False}), ("mul", {"inplace": True}), ("vector_add", {}),
    ("pointwise_chain", {"iterations": 20}),
    ("sum", {"layout": "contiguous"}), ("sum", {"layout": "transposed"}),
    ("copy", {"direction": "d2d"}),
    ("custom", {"target": "ops.examples:gelu_mul"}),
    ("mlp", {"activation": "gelu"}), ("mlp", {"activation": "relu", "layers": 2}),
    ("monte_carlo_pi", {}), ("matvec", {}),
    ("cpu_roundtrip", {"where": "host"}), ("cpu_roundtrip", {"where": "device"}),
    ("conv2d", {"bias": True}), ("conv2d", {"bias": False}),
    ("sdpa", {"causal": False}), ("sdpa", {"causal": True}),
    ("softmax", {}), ("layer_norm", {}), ("matrix_power", {}), ("projection", {}),
    ("varying_inputs", {"vary": "none"}), ("varying_inputs", {"vary": "shape"}),
    ("varying_inputs", {"vary": "dtype"}),
]


def _case_id(case: tuple[str, dict[str, Any]]) -> str:
    name, params = case
    return "-".join([name] + [f"{k}={v}" for k, v in params.items()])


@pytest.mark.parametrize("dtype, limit", [(torch.float32, 1e-4), (torch.float64, 1e-12)],
                         ids=["fp32", "fp64"])
@pytest.mark.parametrize("case", CHECKED, ids=_case_id)
def test_matches_reference(case: tuple[str, dict[str, Any]], dtype: torch.dtype,
                           limit: float) -> None:
    name, params = case
    workload = build(name, dtype=dtype, **params)
    error = error_of(workload)
    if workload.accuracy is not None:  # Monte-Carlo: the op's own tolerance applies
        assert workload.tolerance is not None and error <= workload.tolerance
    else:
        assert error < limit, f"{name} {params}: relative error {error:.3g} >= {limit}"


def test_every_op_is_checked_or_has_no_reference() -> None:
    """New YAMLs must get a tiny shape and an accuracy case (or a reason to have none)."""
    no_reference = {"tensor_create", "alloc", "copy_compute_overlap"}  # random / no output / cuda
    assert set(TINY) == set(YAML_NAMES)
    assert {name for name, _ in CHECKED} | no_reference == set(YAML_NAMES)


@pytest.mark.parametrize("case", [c for c in CHECKED if c[0] != "monte_carlo_pi"],
                         ids=_case_id)
def test_backward_runs_where_supported(case: tuple[str, dict[str, Any]]) -> None:
    """What the runner's backward mode does: grads on inputs and module params, then
    backward of the output. Ops that claim support must produce grads; in-place ops and
    copies must not claim it."""
    name, params = case
    workload = build(name, **params)
    if not workload.supports_backward:
        assert name in ("add", "mul", "copy", "cpu_roundtrip", "varying_inputs")
        return
    leaves = grad_leaves(workload)
    for leaf in leaves:
        leaf.requires_grad_(True)
    out = workload.fn()
    assert isinstance(out, torch.Tensor)
    out.backward(torch.ones_like(out))
    assert any(leaf.grad is not None for leaf in leaves)


def test_module_params_start_without_grad() -> None:
    """Forward-only trials must not record autograd graphs; backward mode turns grads on."""
    for name in ("linear", "mlp"):
        module = build(name).module
        assert module is not None
        assert all(not p.requires_grad for p in module.parameters())


def test_same_seed_same_inputs_and_weights() -> None:
    first, again, other = build("linear", seed=3), build("linear", seed=3), build("linear", seed=4)
    assert first.module is not None and again.module is not None and other.module is not None
    assert torch.equal(first.inputs[0], again.inputs[0])
    assert torch.equal(first.module.weight, again.module.weight)
    assert not torch.equal(first.module.weight, other.module.weight)


def test_inputs_are_random_not_constant() -> None:
    for name in ("matmul", "add", "conv2d", "layer_norm"):
        for tensor in build(name).inputs:
            assert tensor.std() > 0.1, f"{name} input looks constant"


# ---------------------------------------------------------------------------------------
# FLOPs and bytes, worked out by hand for fp32 (4-byte elements)
# ---------------------------------------------------------------------------------------

FORMULAS: list[tuple[str, tuple[int, ...], dict[str, Any], float, float]] = [
    # name, shape, params, flops, bytes
    ("matmul", (2, 3, 4), {}, 2 * 2 * 3 * 4, (8 + 12 + 6) * FP32),
    ("bmm", (2, 3, 4, 5), {}, 2 * 2 * 3 * 4 * 5, 2 * (15 + 20 + 12) * FP32),
    ("batched_dot", (3, 4), {"impl": "bmm"}, 24, (12 + 12 + 3) * FP32),
    ("linear", (2, 3, 4), {"bias": False}, 48, (6 + 12 + 8) * FP32),
    ("linear", (2, 3, 4), {"bias": True}, 48 + 8, (6 + 12 + 4 + 8) * FP32),
    ("add", (3, 4), {"inplace": True}, 12, 36 * FP32),
    ("mul", (2, 3, 4), {}, 24, 72 * FP32),
    ("vector_add", (10,), {}, 10, 30 * FP32),
    ("pointwise_chain", (5,), {"iterations": 500}, 4 * 500 * 5, 10 * FP32),
    ("sum", (3, 4), {"layout": "transposed"}, 12, (12 + 4) * FP32),
    ("copy", (100,), {"direction": "d2d"}, 0, 200 * FP32),
    ("mlp", (2, 3), {"layers": 4}, 2 * 2 * 3 * 3 * 4, (6 + 4 * 9 + 6) * FP32),
    ("monte_carlo_pi", (1000,), {}, 9000, 4),
    ("matvec", (5, 3), {}, 30, (15 + 3 + 5) * FP32),
    ("tensor_create", (4, 5), {"where": "device"}, 0, 20 * FP32),
    ("alloc", (4, 3), {}, 0, 0),
    ("cpu_roundtrip", (3, 4), {"where": "host"}, 12, 13 * FP32),
    # conv2d: N=1, C_in=2, 4x4 image, C_out=3, k=3, padding 1 -> 4x4 output (48 elements)
    ("conv2d", (1, 2, 4, 4, 3, 3), {"bias": True},
     2 * 48 * 2 * 9 + 48, (32 + 54 + 3 + 48) * FP32),
    # even kernel: k=2, padding 1 -> 5x5 output (75 elements)
    ("conv2d", (1, 2, 4, 4, 3, 2), {"bias": False}, 2 * 75 * 2 * 4, (32 + 24 + 75) * FP32),
    ("sdpa", (1, 2, 4, 3), {"causal": False}, 4 * 2 * 16 * 3, 4 * 24 * FP32),
    ("sdpa", (1, 2, 4, 3), {"causal": True}, 2 * 2 * 16 * 3, 4 * 24 * FP32),
    ("softmax", (3, 4), {}, 60, 24 * FP32),
    ("layer_norm", (3, 4), {}, 84, (24 + 8) * FP32),
    ("matrix_power", (4,), {"power": 6}, 2 * 64 * 5, 32 * FP32),
    ("projection", (6, 2), {}, 72, (36 + 12) * FP32),
    ("custom", (3, 4), {"target": "ops.examples:gelu_mul"}, None, 36 * FP32),
    ("custom", (3, 4), {"target": "ops.examples:gelu_mul", "flops": 7.0,
                        "bytes_moved": 100.0}, 7, 100),
]


@pytest.mark.parametrize("name, shape, params, flops, nbytes", FORMULAS,
                         ids=[f"{f[0]}-{'x'.join(map(str, f[1]))}-{i}"
                              for i, f in enumerate(FORMULAS)])
def test_flops_and_bytes(name: str, shape: tuple[int, ...], params: dict[str, Any],
                         flops: float | None, nbytes: float) -> None:
    workload = build(name, shape, **params)
    assert workload.flops == flops
    assert workload.bytes_moved == nbytes


def test_bytes_scale_with_dtype() -> None:
    assert build("matmul", (2, 3, 4), dtype=torch.float64).bytes_moved == 26 * 8


# ---------------------------------------------------------------------------------------
# Unsupported combinations are skips, bad input is a ValueError
# ---------------------------------------------------------------------------------------

SKIPPED_ON_CPU: list[tuple[str, dict[str, Any], str]] = [
    ("copy", {"direction": "h2d"}, "h2d"),
    ("copy", {"direction": "d2h"}, "d2h"),
    ("copy", {"direction": "h2d", "pinned": True}, "accelerator"),
    ("copy", {"direction": "d2d", "pinned": True}, "pinned"),
    ("copy_compute_overlap", {}, "cuda"),
    ("tensor_create", {"where": "host_then_copy"}, "no-op"),
]


@pytest.mark.parametrize("name, params, reason", SKIPPED_ON_CPU,
                         ids=[_case_id((n, p)) for n, p, _ in SKIPPED_ON_CPU])
def test_cpu_unsupported_combinations_skip(name: str, params: dict[str, Any],
                                           reason: str) -> None:
    with pytest.raises(TrialSkipped, match=reason):
        build(name, **params)


def test_numpy_roundtrip_skips_bfloat16() -> None:
    with pytest.raises(TrialSkipped, match="bfloat16"):
        build("cpu_roundtrip", dtype=torch.bfloat16, where="host")
    assert build("cpu_roundtrip", dtype=torch.bfloat16, where="device") is not None


@pytest.mark.parametrize("name, shape, match", [
    ("matmul", (4, 4), "expects 3"),
    ("conv2d", (1, 2, 3), "expects 6"),
    ("matmul", (4, 0, 4), "positive"),
    ("add", (), "at least one dimension"),
])
def test_bad_shapes_are_value_errors(name: str, shape: tuple[int, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build(name, shape)


@pytest.mark.parametrize("name, params, match", [
    ("batched_dot", {"impl": "loop"}, "impl"),
    ("pointwise_chain", {"iterations": 0}, "iterations"),
    ("matrix_power", {"power": 1}, "power"),
    ("mlp", {"layers": 0}, "layers"),
    ("sum", {"layout": "diagonal"}, "layout"),
    ("copy", {"direction": "p2p"}, "direction"),
    ("custom", {"target": ""}, "op.target=pkg.module:function"),
    ("custom", {"target": "ops.examples:gelu_mul", "n_inputs": 0}, "n_inputs"),
    ("custom", {"target": "ops.examples:gelu_mul", "flops": -5.0}, "flops"),
])
def test_bad_params_are_value_errors(name: str, params: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build(name, **params)


# ---------------------------------------------------------------------------------------
# Op-specific behaviour
# ---------------------------------------------------------------------------------------

def test_inplace_add_reference_follows_the_mutated_input() -> None:
    workload = build("add", inplace=True)
    x = workload.inputs[0]
    start = x.clone()
    for _ in range(3):  # warm-up and timing calls the runner makes before/after the check
        workload.fn()
    assert not torch.equal(x, start)
    assert error_of(workload) < 1e-6
    assert workload.fn() is x  # in place: the output is the input's storage


def test_inplace_mul_keeps_magnitudes_over_many_calls() -> None:
    """Random N(0,1) factors would drive x into denormals; the ±1 factor cannot."""
    workload = build("mul", inplace=True)
    x = workload.inputs[0]
    start = x.abs().clone()
    for _ in range(1001):
        workload.fn()
    assert torch.equal(x.abs(), start)
    assert set(workload.inputs[1].unique().tolist()) <= {-1.0, 1.0}


def test_sum_layouts_hold_the_same_values_with_different_strides() -> None:
    contiguous = build("sum", (7, 9), layout="contiguous")
    transposed = build("sum", (7, 9), layout="transposed")
    assert contiguous.inputs[0].shape == (7, 9) and contiguous.inputs[0].is_contiguous()
    assert transposed.inputs[0].shape == (9, 7)  # the leaf; fn reads its .T view
    assert torch.equal(contiguous.fn(), transposed.fn())


@pytest.mark.parametrize("impl", ["bmm", "einsum"])
def test_batched_dot_impls_agree_with_mul_sum(impl: str) -> None:
    reference = build("batched_dot", impl="mul_sum").fn()
    output = build("batched_dot", impl=impl).fn()
    assert output.shape == (TINY["batched_dot"][0],)
    assert torch.allclose(output, reference, atol=1e-5)


def test_pointwise_chain_converges_like_the_seed() -> None:
    """The CUDA-operations tutorial prints tensor([6., 6., 6., 6., 6.]) after 500 iterations."""
    out = build("pointwise_chain").fn()
    assert torch.allclose(out, torch.full((5,), 6.0), atol=1e-3)


def test_matrix_power_stays_finite_in_fp16() -> None:
    workload = build("matrix_power", (32,), dtype=torch.float16)
    assert torch.isfinite(workload.fn()).all()
    assert error_of(workload) < 1e-2


def test_projection_is_idempotent() -> None:
    """P = A pinv(A) is a projector, so projecting twice changes nothing."""
    workload = build("projection", dtype=torch.float64)
    module = workload.module
    assert module is not None
    once = workload.fn()
    assert torch.allclose(module(once), once, atol=1e-10)
    assert list(module.parameters()) == []  # P is a buffer, as in the tutorial


def test_monte_carlo_tolerance_covers_noise_and_rounding() -> None:
    workload = build("monte_carlo_pi", (10_000,))
    assert workload.reference is None
    assert workload.tolerance == pytest.approx(0.1 + math.pi * torch.finfo(torch.float32).eps)
    assert build("monte_carlo_pi", (10_000,), dtype=torch.bfloat16).tolerance == \
        pytest.approx(0.1 + math.pi * 2**-7)
    estimate = workload.fn()
    assert workload.accuracy is not None and workload.accuracy(estimate) < workload.tolerance


def test_monte_carlo_draws_fresh_numbers_each_call() -> None:
    workload = build("monte_carlo_pi", (1000,))
    assert len({workload.fn().item() for _ in range(5)}) > 1


def test_tensor_create_makes_a_new_random_tensor() -> None:
    workload = build("tensor_create", (4, 5))
    first, second = workload.fn(), workload.fn()
    assert first.shape == (4, 5) and not torch.equal(first, second)
    assert workload.reference is None


def test_alloc_follows_the_seed_sequence_and_records_nothing_on_cpu() -> None:
    from ops.alloc import column_sequence

    assert column_sequence(3072) == (2048, 1024, 3072)
    assert column_sequence(1) == (1, 1, 1)
    workload = build("alloc")
    assert workload.fn() == ()
    assert workload.extra == {}


def test_copy_d2d_copies_the_source() -> None:
    workload = build("copy", (64,))
    out = workload.fn()
    assert torch.equal(out, workload.inputs[0])
    assert out.data_ptr() != workload.inputs[0].data_ptr()


# ---------------------------------------------------------------------------------------
# op=custom
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["ops.examples:gelu_mul", "ops.examples.gelu_mul"])
def test_custom_accepts_colon_and_dotted_targets(target: str) -> None:
    from ops.examples import gelu_mul

    assert resolve_target(target) is gelu_mul


def test_custom_resolves_library_functions() -> None:
    assert resolve_target("torch.nn.functional.gelu") is torch.nn.functional.gelu
    workload = build("custom", (3, 4), target="torch.mul")
    assert error_of(workload) < 1e-6


@pytest.mark.parametrize("target, match", [
    ("no_such_pkg.mod:f", "could not be imported"),
    ("ops.examples:no_such_function", "no attribute"),
    ("ops.examples:torch", "not a callable"),  # a module, not a function
])
def test_custom_bad_targets_are_value_errors(target: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        resolve_target(target)


def test_failing_custom_function_builds_and_fails_when_called() -> None:
    """The runner turns an exception from fn into an error row; build must not hide it."""
    workload = build("custom", target="ops.examples:always_fails")
    assert workload.extra["bytes_moved_source"] == "inputs_only"
    assert workload.bytes_moved == 2 * 12 * FP32
    with pytest.raises(RuntimeError, match="fails on purpose"):
        workload.fn()


def test_custom_counts_outputs_from_meta_tensors() -> None:
    workload = build("custom", (3, 4), target="ops.examples:gelu_mul", n_inputs=2)
    assert workload.flops is None  # counted by the runner
    assert workload.extra["bytes_moved_source"] == "meta"
    assert workload.bytes_moved == 3 * 12 * FP32


# ---------------------------------------------------------------------------------------
# conf/op/*.yaml against the builders' signatures
# ---------------------------------------------------------------------------------------

def test_every_yaml_has_a_tiny_shape() -> None:
    assert YAML_NAMES, "no op YAMLs found"
    assert set(YAML_NAMES) == set(TINY)


@pytest.mark.parametrize("name", YAML_NAMES)
def test_yaml_matches_builder_signature(name: str) -> None:
    cfg = load_yaml(name)
    assert cfg.get("name") == name, "the YAML's name must match its file name"
    builder = resolve(cfg["_target_"])
    assert callable(builder)
    hints = typing.get_type_hints(builder)  # what the runner does: must resolve
    parameters = inspect.signature(builder).parameters
    assert next(iter(parameters)) == "ctx"

    for key, value in cfg.items():
        if key in RESERVED:
            continue
        assert key in parameters, f"{name}: yaml key {key!r} is not a parameter of the builder"
        parameter = parameters[key]
        assert parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD or \
            parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert parameter.default is not inspect.Parameter.empty, f"{name}.{key} has no default"
        assert key in hints, f"{name}.{key} has no type annotation"
        assert isinstance(value, (str, int, float, bool)), f"{name}.{key} must be a scalar"
        annotation = hints[key]
        if typing.get_origin(annotation) is typing.Literal:
            choices = typing.get_args(annotation)
            assert value in choices, f"{name}.{key}={value!r} not in {choices}"
            assert parameter.default in choices
        else:
            assert annotation in (str, int, float, bool), f"{name}.{key}: {annotation}"
            if annotation is float:
                assert isinstance(value, (int, float)) and not isinstance(value, bool)
            else:
                assert type(value) is annotation, f"{name}.{key}={value!r} is not {annotation}"

    shape_names = cfg["shape_names"]
    default_shape = cfg["default_shape"]
    assert isinstance(default_shape, list) and default_shape
    assert all(isinstance(d, int) and d >= 1 for d in default_shape)
    if shape_names is not None:
        assert len(default_shape) == len(shape_names)
        assert len(TINY[name]) == len(shape_names)


@pytest.mark.parametrize("name", YAML_NAMES)
def test_yaml_has_an_explaining_comment(name: str) -> None:
    first_line = (CONF_OP / f"{name}.yaml").read_text().splitlines()[0]
    assert first_line.startswith("# ")


# ---------------------------------------------------------------------------------------
# CUDA-only paths (skipped without a GPU): what the cpu tests can only see as skips
# ---------------------------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("direction", ["d2d", "h2d", "d2h"])
@pytest.mark.parametrize("pinned", [False, True])
def test_gpu_copy_directions(direction: str, pinned: bool) -> None:
    if direction == "d2d" and pinned:
        with pytest.raises(TrialSkipped):
            build("copy", (4096,), device="cuda", direction=direction, pinned=pinned)
        return
    workload = build("copy", (4096,), device="cuda", direction=direction, pinned=pinned)
    src = workload.inputs[0]
    assert src.device.type == ("cpu" if direction == "h2d" else "cuda")
    if direction == "h2d":
        assert src.is_pinned() == pinned
    assert error_of(workload) == 0.0
    out = workload.fn()
    assert out.device.type == ("cpu" if direction == "d2h" else "cuda")
    if direction == "d2h":
        assert out.is_pinned() == pinned


@pytest.mark.gpu
@needs_cuda
def test_gpu_copy_compute_overlap_parts_and_fn() -> None:
    workload = build("copy_compute_overlap", (64, 32, 3), device="cuda")
    assert len(workload.parts) == 2
    assert error_of(workload) < 1e-4
    product, last = (part() for part in workload.parts)
    torch.cuda.synchronize()
    assert product.shape == (64, 64) and last.shape == (32, 32)


@pytest.mark.gpu
@needs_cuda
def test_gpu_alloc_records_allocator_counters_once() -> None:
    workload = build("alloc", (256, 96), device="cuda")
    workload.fn()
    first = dict(workload.extra)
    assert sorted(first) == sorted(
        f"{kind}_bytes_step{i}_cols{c}" for kind in ("allocated", "reserved")
        for i, c in enumerate((64, 32, 96), start=1))
    assert first["allocated_bytes_step3_cols96"] >= 256 * 96 * FP32
    workload.fn()
    assert workload.extra == first  # recorded on the first call only


@pytest.mark.gpu
@needs_cuda
def test_gpu_tensor_create_lands_on_the_device() -> None:
    for where in ("device", "host_then_copy"):
        out = build("tensor_create", (4, 5), device="cuda", where=where).fn()
        assert out.device.type == "cuda" and out.shape == (4, 5)


def test_seeded_linear_uses_neither_the_meta_device_nor_the_global_rng(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights come from the trial's generator alone, and the module is built without
    the meta device (whose first use in a process imported seconds of PyTorch inside the
    first linear trial of every worker): the global RNG is untouched, ``to_empty`` is never
    called, and the same seed gives the same weights."""
    from ops.common import seeded_linear

    def no_meta(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("seeded_linear went through the meta device (Module.to_empty)")

    monkeypatch.setattr(torch.nn.Module, "to_empty", no_meta)

    def layer(seed: int) -> torch.nn.Linear:
        generator = torch.Generator().manual_seed(seed)
        ctx = OpContext(shape=(2, 8, 4), dtype=torch.float32, device=torch.device("cpu"),
                        generator=generator, seed=seed)
        return seeded_linear(ctx, 8, 4, bias=True)

    state = torch.get_rng_state()
    first, again = layer(3), layer(3)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(first.weight, again.weight) and torch.equal(first.bias, again.bias)
    assert not first.weight.requires_grad
