"""Execution modes: the one place that turns an op's workloads into the callable that is timed.

The four mode axes compose here in five steps (``graph`` has two), in this order, for any op:

1. ``compile``   – ``torch.compile`` the op's forward callable (dynamo state reset first).
2. ``graph=graphed_callable`` – ``torch.cuda.make_graphed_callables`` on the op's module or
   function, forward and backward graphed.
3. ``backward``  – each call runs forward then backward; grads are reset between samples
   (outside the timed region) unless a CUDA graph owns them.
4. ``streams=N`` – N independent workloads, one per stream, forked from and joined back into
   the current stream; or, for a composite op that declares ``parts``, its parts spread over N
   streams.
5. ``graph=cuda_graph`` – warm up on a side stream, capture the whole callable above with its
   long-lived inputs, and time replays.

Combinations PyTorch cannot do raise :class:`~ops.base.TrialSkipped` with the reason; they
become ``skipped`` rows. No op contains mode-specific code, and the timer times whatever
:func:`prepare` returns.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ops.base import TrialSkipped, Workload
from runner.config.trials import TrialSpec
from runner.core.axes import CompileMode, GraphMode
from runner.timing.cuda_device import capture_graph


@dataclass
class Prepared:
    """The callable to time and what the modes measured while building it."""

    fn: Callable[[], Any]
    #: maps ``fn()``'s result to one output per workload, for the accuracy check
    split: Callable[[Any], list[Any]]
    #: runs before every sample, outside the timed region (grad reset in backward mode)
    before_sample: Callable[[], None] | None = None
    #: how many op instances one call of ``fn`` runs (N for streams=N replicas)
    ops_per_sample: int = 1
    compile_time_s: float | None = None
    capture_time_s: float | None = None
    compile_stats: dict[str, Any] = field(default_factory=dict)
    #: the same work as ``fn`` before ``graph=cuda_graph`` captured it: what the device time
    #: captures K times (``runner.timing.device_time``); ``fn`` itself in every other mode
    uncaptured: Callable[[], Any] | None = None
    #: why ``uncaptured`` must not be captured into a graph (it replays graphs of its own)
    capture_blocker: str | None = None
    #: ``fn`` is the plain eager call: the energy window may capture it in a graph of its own
    capturable: bool = False

    def finish(self) -> None:
        """After timing: graphs dynamo made after the first call (accuracy check, warm-up,
        samples) are recompiles, e.g. an op whose inputs change dtype or shape between
        calls."""
        if "graph_count" in self.compile_stats:
            graphs_now = _dynamo_counters()["stats"]["unique_graphs"]
            self.compile_stats["recompile_count"] = graphs_now - self.compile_stats["graph_count"]


def check_supported(spec: TrialSpec, workload: Workload) -> None:
    """Reject combinations that cannot run, before building anything expensive."""
    on_cuda = spec.device.startswith("cuda")
    if spec.graph is not GraphMode.none and not on_cuda:
        raise TrialSkipped(f"graph={spec.graph.value} needs a CUDA device; this trial runs on "
                           f"{spec.device}")
    if spec.streams > 1 and not on_cuda:
        raise TrialSkipped(f"streams={spec.streams} needs a CUDA device; this trial runs on "
                           f"{spec.device}")
    if spec.backward and not workload.supports_backward:
        raise TrialSkipped(f"backward=true does not apply to op '{spec.op}' (it has no "
                           "differentiable output); run it with backward=false")
    if workload.parts and (spec.backward or spec.compile is not CompileMode.none
                           or spec.graph is GraphMode.graphed_callable):
        raise TrialSkipped(f"op '{spec.op}' is a composite of independent parts; only streams "
                           "and graph=cuda_graph apply to it")
    if spec.graph is GraphMode.graphed_callable:
        if spec.streams > 1:
            raise TrialSkipped("graph=graphed_callable graphs one callable on one stream; use "
                               "graph=cuda_graph to capture streams>1")
        if spec.compile is not CompileMode.none:
            raise TrialSkipped("graph=graphed_callable cannot wrap a torch.compile'd callable; "
                               "use compile=reduce-overhead or graph=cuda_graph instead")
    if spec.graph is GraphMode.cuda_graph and spec.compile is CompileMode.reduce_overhead:
        raise TrialSkipped("compile=reduce-overhead already replays CUDA graphs; capturing it "
                           "in another graph is not supported. Use compile=default with "
                           "graph=cuda_graph, or graph=none")


def prepare(spec: TrialSpec, workloads: Sequence[Workload]) -> Prepared:
    """Compose the modes of ``spec`` around ``workloads`` (already built on the device)."""
    device = torch.device(spec.device)
    forwards = [w.fn for w in workloads]
    compile_stats: dict[str, Any] = {}
    if spec.compile is not CompileMode.none:
        torch._dynamo.reset()
        _dynamo_counters().clear()
        forwards = [torch.compile(f, mode=None if spec.compile is CompileMode.default
                                  else spec.compile.value,
                                  dynamic=spec.compile_dynamic, fullgraph=spec.fullgraph)
                    for f in forwards]
    if spec.graph is GraphMode.graphed_callable:
        forwards = [_graphed(w, spec.backward) for w in workloads]

    calls, before_sample = forwards, None
    if spec.backward:
        leaves = [leaf for w in workloads for leaf in grad_leaves(w)]
        calls = [_with_backward(f) for f in forwards]
        if spec.graph is not GraphMode.cuda_graph:
            # As triton.testing.do_bench's grad_to_none: without the reset, backward would
            # accumulate into existing .grad (an extra read-modify-write per leaf per call).
            def before_sample() -> None:
                for leaf in leaves:
                    leaf.grad = None

    first = workloads[0]
    split: Callable[[Any], list[Any]] = lambda result: [result]  # noqa: E731
    if spec.streams > 1 and first.parts:
        fn, ops_per_sample = _spread_parts(first.parts, spec.streams, device), 1
    elif spec.streams > 1:
        fn, ops_per_sample, split = _fork_join(calls, device), len(calls), list
    else:
        fn, ops_per_sample = calls[0], 1

    compile_time_s = None
    if spec.compile is not CompileMode.none:
        # Compile time is the wall time of the first call, synchronised; it never enters the
        # samples because the timer's warm-up starts afterwards.
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        compile_time_s = time.perf_counter() - start
        counters = _dynamo_counters()
        breaks = counters.get("graph_break", {})
        compile_stats = {
            "graph_count": counters["stats"]["unique_graphs"],
            "graph_break_count": sum(breaks.values()),
            "graph_break_reasons": "; ".join(reason.splitlines()[0] for reason in breaks),
        }
    capture_time_s, uncaptured = None, fn
    if spec.graph is GraphMode.cuda_graph:
        fn, capture_time_s = _capture(fn, device)
    return Prepared(fn=fn, split=split, before_sample=before_sample,
                    ops_per_sample=ops_per_sample, compile_time_s=compile_time_s,
                    capture_time_s=capture_time_s, compile_stats=compile_stats,
                    uncaptured=uncaptured, capture_blocker=_capture_blocker(spec),
                    capturable=spec.graph is GraphMode.none and spec.compile is CompileMode.none
                    and not spec.backward)


def _capture_blocker(spec: TrialSpec) -> str | None:
    """Why the composed callable cannot go into another CUDA graph, or None."""
    if spec.compile in (CompileMode.reduce_overhead, CompileMode.max_autotune):
        return f"compile={spec.compile.value} replays CUDA graphs of its own"
    if spec.graph is GraphMode.graphed_callable:
        return "graph=graphed_callable replays CUDA graphs of its own"
    return None


@contextlib.contextmanager
def compile_isolation(spec: TrialSpec) -> Iterator[None]:
    """Keep compiled trials independent: fresh dynamo state before and after, every inductor
    cache off (``torch.compiler.config.force_disable_caches``: FX graphs, autograd, autotuning,
    kernels; dynamo's warning that this disables its PGO is silenced), so ``compile_time_s``
    is a cold compile. Process-wide warm state (imported modules, a compile-worker pool, the
    CUDA context) still makes the first compiled trial of a process slower than the rest."""
    if spec.compile is CompileMode.none:
        yield
        return
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with contextlib.ExitStack() as stack:
        stack.enter_context(inductor_config.patch(fx_graph_cache=False))
        compiler_config = getattr(torch.compiler, "config", None)
        if hasattr(compiler_config, "force_disable_caches"):
            stack.enter_context(compiler_config.patch(force_disable_caches=True))
            stack.enter_context(warnings.catch_warnings())
            warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
        if hasattr(functorch_config, "enable_autograd_cache"):
            stack.enter_context(functorch_config.patch(enable_autograd_cache=False))
        try:
            yield
        finally:
            torch._dynamo.reset()


def _dynamo_counters() -> Any:
    from torch._dynamo.utils import counters

    return counters


def grad_leaves(workload: Workload) -> list[torch.Tensor]:
    """Floating inputs and module parameters: what backward computes grads for."""
    leaves = [t for t in workload.inputs if t.is_floating_point()]
    if workload.module is not None:
        leaves += list(workload.module.parameters())
    return leaves


def enable_grads(workload: Workload) -> None:
    """Backward mode: make the workload's leaves require grad (before any capture/compile)."""
    for leaf in grad_leaves(workload):
        leaf.requires_grad_(True)


def _with_backward(forward: Callable[[], Any]) -> Callable[[], Any]:
    grad_output: list[torch.Tensor] = []

    def step() -> Any:
        out = forward()
        if not isinstance(out, torch.Tensor):
            raise TrialSkipped("backward=true needs an op whose output is a single tensor")
        if not grad_output:  # made once, on the first (warm-up) call, outside any capture
            grad_output.append(torch.ones_like(out))
        out.backward(grad_output[0])
        return out

    return step


def _graphed(workload: Workload, backward: bool) -> Callable[[], Any]:
    """``make_graphed_callables`` over the op's module (or its function), with the workload's
    own inputs as static sample args (the graphed-callables tutorial's pattern, warm-up too)."""
    args = tuple(workload.inputs)
    if workload.module is not None:
        target: Any = workload.module
    else:
        fn = workload.fn

        def target(*_args: torch.Tensor) -> Any:
            return fn()
    graphed = torch.cuda.make_graphed_callables(target, args, num_warmup_iters=3)
    return lambda: graphed(*args)


def _fork_join(calls: Sequence[Callable[[], Any]], device: torch.device) -> Callable[[], Any]:
    """One call per stream. Each side stream first waits on the current stream (its inputs
    and the start event are ordered before it), and the current stream waits on every side
    stream before returning, so the timer's end event covers all of them."""
    streams = [torch.cuda.Stream(device) for _ in calls]

    def run() -> list[Any]:
        current = torch.cuda.current_stream(device)
        outputs = []
        for stream, call in zip(streams, calls):
            stream.wait_stream(current)
            with torch.cuda.stream(stream):
                outputs.append(call())
        for stream in streams:
            current.wait_stream(stream)
        return outputs

    return run


def _spread_parts(parts: Sequence[Callable[[], Any]], n_streams: int,
                  device: torch.device) -> Callable[[], Any]:
    """A composite op's parts, round-robin over ``n_streams`` streams (the CUDA-operations
    tutorial's overlap of compute with host-to-device copies); results in part order."""
    groups = [list(range(k, len(parts), n_streams)) for k in range(min(n_streams, len(parts)))]
    calls = [lambda idx=idx: [parts[i]() for i in idx] for idx in groups]
    run_groups = _fork_join(calls, device)

    def run() -> list[Any]:
        results: list[Any] = [None] * len(parts)
        for idx, outs in zip(groups, run_groups()):
            for i, out in zip(idx, outs):
                results[i] = out
        return results

    return run


def _capture(fn: Callable[[], Any], device: torch.device) -> tuple[Callable[[], Any], float]:
    """Capture ``fn`` into a CUDA graph (``runner.timing.cuda_device.capture_graph``: warm-up
    on a side stream, static inputs and output) and return (replay, capture seconds)."""
    try:
        replay_graph, static_output, capture_time_s = capture_graph(fn, device)
    except RuntimeError as exc:
        raise TrialSkipped(f"CUDA graph capture failed: {str(exc).splitlines()[0]}") from exc

    def replay() -> Any:
        replay_graph()
        return static_output

    return replay, capture_time_s
