"""Bad input fails fast: exit status 2, a message that names the key, the bad value and the
valid choices, and no results directory, for every kind of mistake.

Each case is checked twice: in-process through ``runner.config.overrides.check_command_line`` (the
checks ``python -m runner`` runs before Hydra runs anything), and end to end through
``python -m runner`` in a fresh working directory. The subprocesses all start together in a
module fixture, so the whole file costs about as much as its slowest run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from runner.config.ops import group_options
from runner.config.overrides import check_command_line
from runner.core.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
OPS = group_options("op", REPO_ROOT / "conf")


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


N_GPUS = _cuda_count()


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    needles: tuple[str, ...]
    #: extra arguments that keep a run cheap if a bug lets it through validation
    safe: tuple[str, ...] = ("timer=smoke",)
    #: known bugs: which checks of this case are expected to fail, and why
    bugs: dict[str, str] = field(default_factory=dict)
    #: also run it through ``python -m runner`` (each run costs a second or two of CPU)
    cli: bool = True


CASES = [
    Case("unknown_key", ("dtyp=fp16",),
         ("unknown config key 'dtyp'", "Did you mean 'dtype'?", "Valid keys:", "dtype",
          "shape", "device", "num_threads", "graph", "backward")),
    Case("bad_dtype", ("dtype=fp61",),
         ("'dtype'", "'fp61'", "fp64, fp32, tf32, fp16, bf16")),
    Case("bad_op", ("op=matmull",), ("'op'", "'matmull'", "Did you mean 'matmul'?", *OPS)),
    (Case("no_cuda", ("device=cuda",),
          ("'device'", "'cuda'", "No CUDA device", "auto, cpu"))
     if N_GPUS == 0 else
     Case("no_such_gpu", (f"device=cuda:{N_GPUS}",),
          ("'device'", f"'cuda:{N_GPUS}'", f"{N_GPUS} CUDA device(s)"))),
    Case("shape_rank", ("op=matmul", "shape=[512,512]"),
         ("'shape'", "[512, 512]", "rank 2", "rank 3 (M, N, K)")),
    Case("shape_negative", ("op=matmul", "shape=[512,-1,512]"),
         ("'shape'", "[512, -1, 512]", "positive integer")),
    Case("shape_rank_in_list", ("op=matmul", "shape=[[8,8,8],[8,8]]"),
         ("'shape'", "[8, 8]", "rank 2"), cli=False),
    Case("op_key", ("op=batched_dot", "op.imp=bmm"),
         ("unknown config key 'op.imp'", "Did you mean 'op.impl'?")),
    Case("op_literal", ("op=batched_dot", "op.impl=fast"),
         ("'op.impl'", "'fast'", "mul_sum, bmm, einsum"),
         safe=("timer=smoke", "shape=[8,8]")),
    Case("op_literal_in_list", ("op=batched_dot", "op.impl=[bmm,fast]"),
         ("'op.impl'", "'fast'", "mul_sum, bmm, einsum"), safe=("timer=smoke", "shape=[8,8]"),
         cli=False),
    Case("op_param_type", ("op=mlp", "op.layers=two"), ("'op.layers'", "'two'", "integer"),
         safe=("timer=smoke", "shape=[4,4]"), cli=False),
    Case("multirun_value", ("dtype=fp32,fp61", "-m"), ("'dtype'", "'fp61'", "bf16"),
         safe=("timer=smoke", "shape=[8,8,8]")),
    Case("list_value", ("dtype=[fp32,fp61]",), ("'dtype'", "'fp61'", "bf16"), cli=False),
    Case("multirun_op", ("op=matmul,matmull", "-m"), ("'op'", "'matmull'", "matmul"),
         safe=("timer=smoke", "shape=[8,8,8]"), cli=False),
    Case("timer_key", ("timer.warmup=3",),
         ("unknown config key 'timer.warmup'", "timer.warmup_s", "timer.warmup_calls")),
    Case("timer_bounds", ("timer.min_samples=20", "timer.max_samples=10"),
         ("min_samples", "max_samples"), safe=("shape=[8,8,8]",)),
    Case("timer_type", ("timer.min_samples=abc",),
         ("'timer.min_samples'", "'abc'", "integer")),
    Case("timer_clock", ("timer.clock=hots",), ("'timer.clock'", "'hots'", "event, host"),
         safe=("timer=smoke", "shape=[8,8,8]")),
]


def params(check: str) -> list[Any]:
    out = []
    for case in CASES:
        if check != "check_command_line" and not case.cli:
            continue
        marks = ([pytest.mark.xfail(strict=True, reason=case.bugs[check])]
                 if check in case.bugs else [])
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


def CLI_RUNS() -> dict[str, list[str]]:  # noqa: N802 (the name conftest looks for)
    """Every case through ``python -m runner``, each in its own empty folder; conftest starts
    them all as soon as collection ends."""
    return {case.id: [*case.args, *case.safe] for case in CASES if case.cli}


@pytest.fixture(scope="module")
def runs(cli_runs: dict[str, Any]) -> dict[str, Any]:
    return cli_runs


# ---------------------------------------------------------------------------------------
# In-process: check_command_line
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", params("check_command_line"))
def test_check_command_line_rejects(case: Case) -> None:
    with pytest.raises(ConfigError) as info:
        check_command_line([*case.args, *case.safe])
    message = str(info.value)
    for needle in case.needles:
        assert needle in message, f"{needle!r} not in {message!r}"


@pytest.mark.parametrize("args", [
    ["op=matmul", "dtype=[fp32,bf16]", "shape=[[8,8,8],[16,16,16]]", "timer=smoke"],
    ["op=batched_dot", "op.impl=[mul_sum,bmm]", "shape=[8,8]"],
    ["-m", "op=matmul,batched_dot", "dtype=fp32,bf16"],
    ["op=custom", "op.target=ops.examples:gelu_mul", "device=cpu", "seed=3"],
    ["experiment=quickstart", "timer.target_rel=0.1", "timer.flush_l2=true"],
    ["hydra.verbose=true", "++notes=x"],
    ["op=matmul", "-m", "dtype=fp32,bf16", "shape=[8,8,8]"],  # an override after -m
])
def test_check_command_line_accepts_good_input(args: list[str]) -> None:
    check_command_line(args)


# ---------------------------------------------------------------------------------------
# End to end: python -m runner
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", params("exit"))
def test_cli_exits_with_status_2(runs: dict[str, Any], case: Case) -> None:
    run = runs[case.id].wait()
    assert run.returncode == 2, run.explain()


@pytest.mark.parametrize("case", params("stderr"))
def test_cli_explains_on_stderr(runs: dict[str, Any], case: Case) -> None:
    run = runs[case.id].wait()
    assert "opsweep: error:" in run.err, run.explain()
    for needle in case.needles:
        assert needle in run.err, f"{needle!r} not on stderr\n{run.explain()}"
    assert "Traceback" not in run.stderr, run.explain()


@pytest.mark.parametrize("case", params("no_results"))
def test_cli_creates_no_results_directory(runs: dict[str, Any], case: Case) -> None:
    run = runs[case.id].wait()
    assert not (run.cwd / "results").exists(), (
        f"results/ was created: {sorted(p.name for p in (run.cwd / 'results').rglob('*'))}"
        f"\n{run.explain()}")
    assert not (run.cwd / "multirun").exists() and not (run.cwd / "outputs").exists()


# ---------------------------------------------------------------------------------------
# One rule per setting, declared on its field
# ---------------------------------------------------------------------------------------

def test_every_scalar_setting_declares_its_rule() -> None:
    """A new number, flag or choice among the settings is checked by declaring it with
    ``runner.config.settings.setting(default, doc, minimum=...)``; nothing else checks it."""
    import dataclasses

    from runner.config.schema import InsightSettings, RunConfig, TimerSettings

    for schema in (RunConfig, TimerSettings, InsightSettings):
        for f in dataclasses.fields(schema):
            if str(f.type) in ("int", "float", "bool") or f.name in ("trial_timeout_s",
                                                                      "workers"):
                assert "rule" in f.metadata, f"{schema.__name__}.{f.name} declares no rule"


@pytest.mark.parametrize(("args", "needles"), [
    (["timer.max_time_s=nan"], ("'timer.max_time_s'", "nan", "finite")),
    (["timer.min_samples=50", "timer.max_samples=10"], ("min_samples (50)", "max_samples (10)")),
    (["experiment=quickstart", "timer.target_rel=-1"], ("'timer.target_rel'", "-1", "> 0")),
])
def test_a_timer_rule_is_the_same_on_the_command_line_and_in_a_composed_job(
        args: list[str], needles: tuple[str, ...], compose: Any) -> None:
    """The command line and the planner read one declaration (TimerSettings' fields)."""
    from runner.config.planner import plan_job

    for check in (lambda: check_command_line(args), lambda: plan_job(compose(*args))):
        with pytest.raises(ConfigError) as info:
            check()
        for needle in needles:
            assert needle in str(info.value), str(info.value)


def test_a_launched_sweep_checks_its_axis_values_here_and_its_devices_where_it_runs() -> None:
    """A SLURM sweep's values are checked before it is submitted, by the planner's one check
    of each axis value; its devices are resolved on the nodes that run it (this machine may
    have no GPU at all)."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    slurm = ["-m", "hydra/launcher=slurm", "op=add", "shape=[4]", "timer=smoke"]
    with pytest.raises(ConfigError, match="invalid value for 'graph': 'bogus'. Valid choices"):
        check_command_line([*slurm, "graph=bogus"])
    check_command_line([*slurm, f"device=cuda:{N_GPUS + 7}"])
    with pytest.raises(ConfigError, match=f"invalid value for 'device': 'cuda:{N_GPUS + 7}'"):
        # submitit_local runs its jobs on this machine: its devices are this machine's
        check_command_line(["-m", "hydra/launcher=submitit_local", *slurm[2:],
                            f"device=cuda:{N_GPUS + 7}"])
