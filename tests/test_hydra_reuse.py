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
    assert again is first
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
