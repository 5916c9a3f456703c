"""One parse and one composition per run, shared with Hydra (``runner.config.hydra_reuse``).

These tests fail when Hydra changes under the two wrapped methods: their signatures, the
``hydra.mode=RUN`` that ``_run_app`` appends, and the config Hydra would compose itself.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from runner.config import hydra_reuse
from runner.config.commandline import parse_command_line
from runner.config.ops import CONF_DIR
from runner.config.preflight import preflight


@pytest.fixture(autouse=True)
def _installed() -> Any:
    hydra_reuse.install()
    yield
    hydra_reuse.forget()


def test_the_wrapped_hydra_methods_keep_their_signatures() -> None:
    from hydra._internal import utils
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.hydra import Hydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parse = inspect.signature(OverridesParser.parse_rule.__wrapped__)
    assert list(parse.parameters) == ["self", "s", "rule_name"]
    load = inspect.signature(ConfigLoaderImpl.load_configuration.__wrapped__)
    assert list(load.parameters) == ["self", "config_name", "overrides", "run_mode",
                                     "from_shell", "validate_sweep_overrides"]
    # what the served compositions are told apart by
    assert "validate_sweep_overrides=False" in inspect.getsource(Hydra.get_mode)
    assert f'overrides.extend(["{hydra_reuse.RUN_MODE}"])' in inspect.getsource(utils._run_app)


def test_an_override_is_parsed_once_and_alike() -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    text = "shape=[[1,2],[3],[4,5,6]]"
    first = OverridesParser.create().parse_overrides([text])[0]
    again = OverridesParser.create().parse_overrides([text])[0]
    assert again == first and again is not first  # each parse its own config_loader
    assert again._value is first._value  # parsed once
    fresh = OverridesParser.parse_rule.__wrapped__(OverridesParser.create(), text, "override")
    assert fresh is not first and fresh == first


def _count_compositions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    calls: list[int] = []
    compose = ConfigLoaderImpl._load_configuration_impl

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return compose(self, *args, **kwargs)

    monkeypatch.setattr(ConfigLoaderImpl, "_load_configuration_impl", counted)
    return calls


def _hydra_as_main_makes_it() -> Any:
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_automatic_config_search_path

    return Hydra.create_main_hydra2(
        task_name="runner",
        config_search_path=create_automatic_config_search_path(None, None, str(CONF_DIR)))


def test_hydra_runs_the_config_the_check_composed(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    cmd = parse_command_line(["op=add", "device=cpu", "timer=smoke",
                              "shape=[[1],[2],[3]]", f"results_dir={tmp_path}"])
    compositions = _count_compositions(monkeypatch)
    preflight(cmd)
    assert len(compositions) == 1
    hydra = _hydra_as_main_makes_it()
    try:
        overrides = list(cmd.texts)
        assert hydra.get_mode("config", overrides) is None  # as hydra.main asks it
        overrides.append(hydra_reuse.RUN_MODE)  # as Hydra's _run_app then adds it
        served = hydra.compose_config("config", overrides, run_mode=RunMode.RUN)
        assert len(compositions) == 1
        composed = hydra.compose_config("config", overrides, run_mode=RunMode.RUN)
        assert len(compositions) == 2  # taken once: the next is Hydra's own
    finally:
        GlobalHydra.instance().clear()
    assert served is not composed
    assert OmegaConf.to_container(served) == OmegaConf.to_container(composed)
    assert served.hydra.mode == RunMode.RUN


def test_a_multirun_and_another_search_path_compose_on_their_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    multi = parse_command_line(["op=add", "device=cpu", "timer=smoke", "seed=1,2",
                                f"results_dir={tmp_path}", "-m"])
    preflight(multi)
    compositions = _count_compositions(monkeypatch)
    hydra = _hydra_as_main_makes_it()
    try:
        hydra.compose_config("config", ["op=add", "device=cpu", "timer=smoke", "seed=1",
                                        f"results_dir={tmp_path}"], run_mode=RunMode.RUN)
        assert len(compositions) == 1
        single = parse_command_line(["op=add", "device=cpu", "timer=smoke",
                                     f"results_dir={tmp_path}"])
        preflight(single, conf_dir=CONF_DIR / ".." / "conf")  # the same folder, spelt apart
        hydra.compose_config("config", [*single.texts, hydra_reuse.RUN_MODE],
                             run_mode=RunMode.RUN)
        assert len(compositions) == 3
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.parametrize("text", [
    "shape=[[1],[2,3],[4096,4096,4096]]", "shape=[]", "shape=[[]]", "seed=[0,10,200]",
    "shape=[512,512]", "x=[[1,[2]],[]]"])
def test_a_plain_list_is_read_as_the_grammar_reads_it(text: str) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    grammar = OverridesParser.parse_rule.__wrapped__(OverridesParser.create(), text, "override")
    plain = hydra_reuse.plain_list(text)
    assert plain == grammar and repr(plain.value()) == repr(grammar.value())


@pytest.mark.parametrize("text", [
    "shape=[01]", "shape=[1,]", "shape=[,]", "shape=[1,,2]", "shape=[-1]", "shape=[1.5]",
    "shape=[1, 2]", "+shape=[1]", "timer.x=[1]", "shape=[a]", "shape=[[1]", "ｓhape=[1]"])
def test_anything_else_is_left_to_the_grammar(text: str) -> None:
    assert hydra_reuse.plain_list(text) is None


# ---------------------------------------------------------------------------------------
# A multirun: jobs that differ only in plain values share one composition
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["op=add", "device=cpu", "timer=smoke", "shape=[64]", "seed=range(4)"],
    ["op=add,mul", "device=cpu", "timer=smoke", "shape=[8],[16]", "check_accuracy=false"],
    ["op=add", "device=cpu", "timer=smoke", "timer.warmup_calls=1,2", "notes=a,b",
     "hydra.job.config.override_dirname.kv_sep=:"],
    # a later override of the same key wins, as in Hydra: never the plain value set apart
    ["op=add", "device=cpu", "timer=smoke", "notes=a,b,c,d", "++notes=z"],
    ["op=add", "device=cpu", "timer=smoke", "timer.warmup_calls=1,2,3,4",
     "++timer={warmup_calls:7}"],
])
def test_a_shared_composition_is_the_one_hydra_makes(args: list[str], tmp_path: Path) -> None:
    """Every job of a multirun, composed from a shared one, equals Hydra's own composition
    of it, its record of the overrides included: if Hydra composed differently, this fails."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    cmd = parse_command_line([*args, f"results_dir={tmp_path}", "-m"])
    jobs = cmd.job_overrides()
    hydra = _hydra_as_main_makes_it()
    try:
        hydra_reuse.share_bases()
        shared = [hydra.compose_config("config", job, run_mode=RunMode.RUN) for job in jobs]
        hydra_reuse.forget()
        own = [hydra.compose_config("config", job, run_mode=RunMode.RUN) for job in jobs]
    finally:
        GlobalHydra.instance().clear()
    assert len(jobs) >= 4
    for job, mine, theirs in zip(jobs, shared, own):
        assert OmegaConf.to_container(mine) == OmegaConf.to_container(theirs), job


def test_a_job_that_differs_in_plain_values_is_composed_from_the_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = parse_command_line(["op=add", "device=cpu", "timer=smoke", "seed=range(30)",
                              f"results_dir={tmp_path}", "-m"])
    compositions = _count_compositions(monkeypatch)
    preflight(cmd)
    assert len(compositions) == 1


def test_every_job_of_a_shared_composition_is_still_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A violation planted in job 57 of 100 (all composed from job 0): exit 2 naming it.
    (Jobs that differ only in trial-axis values are checked by their values:
    tests/test_big_sweeps.py.)"""
    from runner.config import planner
    from runner.core.errors import ConfigError

    plan_job = planner.plan_job

    def planted(cfg: Any, *args: Any, **kwargs: Any) -> Any:
        if cfg.max_trials == 1057:
            raise ConfigError("invalid value for 'max_trials': 1057 (planted)")
        return plan_job(cfg, *args, **kwargs)

    monkeypatch.setattr(planner, "plan_job", planted)
    cmd = parse_command_line(["op=add", "device=cpu", "timer=smoke",
                              "max_trials=range(1000,1100)", f"results_dir={tmp_path}", "-m"])
    with pytest.raises(ConfigError,
                       match=r"^job 57 \(.*max_trials=1057.*\): invalid value for 'max_trials'"):
        preflight(cmd)


def test_a_typo_in_job_57_fails_before_any_trial_and_any_folder(start_cli: Any,
                                                                 tmp_path: Path) -> None:
    notes = [f"n{i}" for i in range(100)]
    notes[57] = "${oc.env:OPSWEEP_NEVER_SET}"
    run = start_cli(["op=add", "device=cpu", "timer=smoke", "shape=[8]", "-m",
                     f"notes={','.join(notes)}", f"results_dir={tmp_path / 'results'}"],
                    tmp_path).wait()
    assert run.returncode == 2, run.explain()
    assert "opsweep: error: job 57 (" in run.err and "OPSWEEP_NEVER_SET" in run.err
    assert "invalid value for 'notes'" in run.err
    assert not (tmp_path / "results").exists()


# ---------------------------------------------------------------------------------------
# Hydra's batch validation: only of jobs the pre-flight check did not check
# ---------------------------------------------------------------------------------------

def _sweeper(cmd: Any) -> Any:
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.types import RunMode

    hydra = _hydra_as_main_makes_it()
    sweeper = BasicSweeper(max_batch_size=None, params=None)
    sweeper.config = hydra.compose_config("config", [*cmd.texts, "hydra.mode=MULTIRUN"],
                                          run_mode=RunMode.MULTIRUN)
    sweeper.config_loader = hydra.config_loader
    sweeper.hydra_context = None
    return sweeper


def test_the_sweeper_validates_only_what_the_check_did_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The jobs the pre-flight check composed are not composed again; a job it never saw (a
    planted bad one) still is, and Hydra still refuses it."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException

    cmd = parse_command_line(["op=add", "device=cpu", "timer=smoke", "seed=1,2",
                              f"results_dir={tmp_path}", "-m"])
    preflight(cmd)
    batch = [job for job in cmd.job_overrides()]
    try:
        sweeper = _sweeper(cmd)
        compositions = _count_compositions(monkeypatch)
        sweeper.validate_batch_is_legal(batch)
        assert compositions == []
        unchecked = [*batch[0][:-1], "no_such_key=1"]
        with pytest.raises(ConfigCompositionException):
            sweeper.validate_batch_is_legal([*batch, unchecked])
        assert compositions
    finally:
        GlobalHydra.instance().clear()
