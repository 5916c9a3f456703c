"""Big sweeps: a sweep too large is refused from its count, with a fix that passes; a multirun
of thousands of jobs checks each job's values and plans the job when it is launched; a sweep
too long for the command line is written in an experiment file (docs/scale-out.md).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from runner.config import hydra_reuse, planner
from runner.config.commandline import CommandLine, parse_command_line
from runner.config.overrides import check_overrides
from runner.config.preflight import check_job_count, preflight
from runner.core.errors import ConfigError

BASE = ["op=add", "device=cpu", "timer=smoke"]


@pytest.fixture(autouse=True)
def _installed() -> Any:
    hydra_reuse.install()
    yield
    hydra_reuse.forget()


def _never_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing a sweep's values (10^7 of them: 1.1 GB and 5 s) fails the test."""
    def listed(self: CommandLine, override: Any) -> list[Any]:
        if override.is_sweep_override():
            raise AssertionError(f"{override.input_line} was listed")
        return [override.value()]

    monkeypatch.setattr(CommandLine, "values", listed)


# ---------------------------------------------------------------------------------------
# A sweep without -m
# ---------------------------------------------------------------------------------------

def test_a_huge_sweep_without_m_is_refused_by_the_count_guard_unlisted(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cmd = parse_command_line([*BASE, "seed=range(0,10000000)", f"results_dir={tmp_path}"])
    _never_listed(monkeypatch)
    with pytest.raises(ConfigError) as guard:
        check_job_count(cmd)  # the guard that runs before the workers start
    with pytest.raises(ConfigError) as overrides:
        check_overrides(cmd)  # and the same words where no trial runs (--cfg job)
    message = str(guard.value)
    assert str(overrides.value) == message
    assert "10000000 jobs" in message and "max_trials=100000" in message
    assert "Traceback" not in message and "\n" not in message
    # the fix it gives passes the guard that refused it (no second refusal)
    fix = re.search(r"python -m runner (-m \S+)", message)
    assert fix is not None, message
    args = [*BASE, *fix.group(1).replace("'", "").split()]
    fixed = parse_command_line(args)
    check_job_count(fixed)
    assert fixed.multirun and "seed=range(0,100000)" in fixed.texts
    assert "then seed='range(100000,200000)'" in message


@pytest.mark.parametrize("others", [[], ["dtype=fp32,fp64"]])
def test_a_multirun_of_too_many_jobs_is_given_ranges_that_fit(others: list[str]) -> None:
    """Raising max_trials to 10^7 jobs would list them all before the first ran: the fix
    given is the range that fits beside the other sweeps, and it passes the check."""
    cmd = parse_command_line([*BASE, "seed=range(0,10000000)", *others, "-m"])
    with pytest.raises(ConfigError) as caught:
        check_job_count(cmd)
    fix = re.search(r"(-m seed='range\(0,\d+\)')", str(caught.value))
    assert fix is not None, caught.value
    assert "max_trials=10000000" not in str(caught.value)
    check_job_count(parse_command_line([*BASE, *others,
                                        *shlex.split(fix.group(1).replace("'", ""))]))


def test_a_small_sweep_without_m_is_told_to_add_m(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = parse_command_line([*BASE, "seed=range(0,100)"])
    _never_listed(monkeypatch)
    with pytest.raises(ConfigError, match=r"over 100 jobs, which needs -m: add -m") as caught:
        check_job_count(cmd)
    assert "seed=[0,1,2,3,4,5,6,7,8,9,...,99]" in str(caught.value)
    check_job_count(parse_command_line([*BASE, "seed=range(0,100)", "-m"]))  # the fix passes


def test_a_sweep_without_m_starts_no_worker_before_its_refusal() -> None:
    from runner.config.early_workers import early_request

    for sweep in ["seed=range(0,10000000)", "dtype=fp16,fp32", "seed=choice(1,2)"]:
        assert early_request([*BASE[:1], sweep]) is None, sweep
        assert early_request([*BASE[:1], sweep, "-m"]) is not None, sweep
    for single in ["shape=[1,2]", "shape=[[1],[2]]", "notes='a,b'", "notes=x"]:
        assert early_request([*BASE[:1], single]) is not None, single


def test_the_cli_refuses_a_huge_sweep_without_m_in_one_line(start_cli: Any,
                                                           tmp_path: Path) -> None:
    refused = start_cli([*BASE, "seed=range(0,10000000)"], tmp_path).wait()
    assert refused.returncode == 2, refused.explain()
    lines = refused.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("opsweep: error: "), refused.err
    assert "max_trials=100000" in lines[0] and "-m seed='range(0,100000)'" in lines[0]
    assert not (tmp_path / "results").exists()


# ---------------------------------------------------------------------------------------
# A multirun of many jobs: checked by values, planned when launched
# ---------------------------------------------------------------------------------------

def _counted_plans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    plan_job = planner.plan_job

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return plan_job(*args, **kwargs)

    monkeypatch.setattr(planner, "plan_job", counted)
    return calls


def test_jobs_that_differ_in_axis_values_are_planned_once_before_the_first_runs(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    plans = _counted_plans(monkeypatch)
    preflight(parse_command_line([*BASE, "seed=range(0,60)", f"results_dir={tmp_path}",
                                  "-m"]))
    assert len(plans) == 1  # job 0 planned; the others are checked by their values
    assert "60 trials in 60 jobs" in capsys.readouterr().err
    # each such job's trial count follows from its axes
    preflight(parse_command_line([*BASE, "seed=[1,2],[3]", "dtype=[fp32,fp64]",
                                  f"results_dir={tmp_path}", "-m"]))
    assert "sweep: 6 trials in 2 jobs (4, 2 trials)" in capsys.readouterr().err


@pytest.mark.parametrize(("sweep", "job", "named"), [
    ("seed=" + ",".join(str(n) for n in range(40)) + ",-1", 40, "'seed': -1"),
    ("num_threads=1,1000000", 1, "'num_threads': 1000000"),
    ("dtype=fp32,fp64,fp8", 2, "'dtype': 'fp8'"),
    ("seed=[1,2],[]", 1, "seed=[] is empty"),
])
def test_a_bad_value_in_a_late_job_still_fails_before_any_trial(
        sweep: str, job: int, named: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        preflight(parse_command_line([*BASE, sweep, f"results_dir={tmp_path}", "-m"]))
    assert str(caught.value).startswith(f"job {job} (") and named in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_an_axis_that_an_interpolation_reads_is_checked_job_by_job(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plans = _counted_plans(monkeypatch)
    preflight(parse_command_line([*BASE, "seed=1,2,3", "notes=run_${seed}",
                                  f"results_dir={tmp_path}", "-m"]))
    assert len(plans) == 3
    plans.clear()
    preflight(parse_command_line([*BASE, "results_dir=a,b", f"sweep_id={tmp_path.name}",
                                  "-m"]))
    assert len(plans) == 2  # a setting, not an axis: each job planned


def test_a_plain_integer_override_reads_as_the_grammar_reads_it() -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for text in ["seed=57", "seed=0", "streams=-3", "seed=07", "seed=+5", "seed=1_000"]:
        grammar = OverridesParser.parse_rule.__wrapped__(parser, text, "override")
        plain = hydra_reuse.plain_list(text)
        if plain is not None:
            assert plain == grammar and type(plain.value()) is type(grammar.value())
        else:
            assert text in ("seed=07", "seed=+5", "seed=1_000")  # left to the grammar


@pytest.mark.slow
def test_a_multirun_planned_at_launch_writes_what_it_would_have(start_cli: Any,
                                                                tmp_path: Path) -> None:
    import pandas as pd

    done = start_cli([*BASE, "shape=[8]", "seed=[1,2],[3]", "sweep_id=s", "-m"],
                     tmp_path).wait()
    assert done.returncode == 0, done.explain()
    rows = pd.read_parquet(tmp_path / "results" / "s" / "results.parquet")
    assert sorted(zip(rows["job_num"], rows["seed"])) == [(0, 1), (0, 2), (1, 3)]
    assert set(rows["status"]) == {"ok"}


# ---------------------------------------------------------------------------------------
# A sweep too long for the command line: docs/scale-out.md
# ---------------------------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[1] / "docs" / "scale-out.md"


def _doc_blocks() -> tuple[str, str]:
    """The section's generator script and its command line, as the doc shows them."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Sweeps too long for the command line"):]
    script = re.search(r"```python\n(.*?)```", section, re.S)
    command = re.search(r"```\n(python -m runner [^\n]*)\n```", section)
    assert script is not None and command is not None
    return script.group(1), command.group(1)


@pytest.mark.slow
def test_the_documented_hundred_thousand_trial_sweep_is_counted_from_its_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script, command = _doc_blocks()
    monkeypatch.chdir(tmp_path)
    exec(compile(script, "scale-out.md", "exec"), {"__name__": "__main__"})
    args = shlex.split(command)[3:]
    assert "-m" in args and not any(len(a) > 200 for a in args)  # short enough for any shell
    cmd = parse_command_line([*args, "max_trials=99999"])
    with pytest.raises(ConfigError, match=r"100,000 trials in 5 jobs"):
        preflight(cmd)


@pytest.mark.slow
def test_the_documented_sweep_runs_when_made_smaller(start_cli: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The same file and command line with 3 shapes instead of 20,000: every job runs."""
    script, command = _doc_blocks()
    assert "range(1, 20001)" in script
    monkeypatch.chdir(tmp_path)
    exec(compile(script.replace("range(1, 20001)", "range(1, 4)"), "scale-out.md", "exec"),
         {"__name__": "__main__"})
    done = start_cli([*shlex.split(command)[3:], "device=cpu", "timer=smoke", "sweep_id=s"],
                     tmp_path).wait()
    assert done.returncode == 0, done.explain()
    assert "sweep: 15 trials in 5 jobs" in done.err
    assert (tmp_path / "results" / "s" / "results.parquet").is_file()
