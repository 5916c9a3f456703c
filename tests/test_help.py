"""``python -m runner --help`` speaks opsweep: ops, experiments, timer presets, axes, settings."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from runner.config.help import first_comment, help_template
from runner.config.schema import RunConfig
from runner.core.axes import AXES

CONF = Path(__file__).resolve().parent.parent / "conf"


def test_help_lists_every_op_experiment_preset_and_axis(start_cli, tmp_path) -> None:
    run = start_cli(["--help"], tmp_path).wait()
    assert run.returncode == 0, run.explain()
    for group in ("op", "experiment", "timer", "hydra/launcher"):
        for path in CONF.glob(f"{group}/*.yaml"):
            assert f"  {path.stem} " in run.stdout, f"{group} {path.stem} missing from --help"
    # the launchers Hydra and its plugins name, which no file of conf/ shows
    launchers = " ".join(run.stdout.partition("== Launchers")[2].partition("\n==")[0].split())
    assert "basic (the default" in launchers and "submitit_local" in launchers
    if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is not None:
        assert " ray," in launchers
    for flag in ("--columns", "--docs", "--version"):  # what a wheel's user can read
        assert f"python -m runner {flag}" in run.stdout
    for axis in AXES:
        assert f"  {axis.name} " in run.stdout and axis.doc in run.stdout
    assert "gpu_warmup_s=0.0" in run.stdout  # a setting with its default
    assert "Powered by Hydra" not in run.stdout
    assert not list(tmp_path.iterdir()), "--help must not create a results folder"


def test_descriptions_come_from_the_first_sentence_of_the_opening_comment(tmp_path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("# @package _global_\n# Title — what it asks.\n# More text.\nkey: 1\n")
    assert first_comment(path) == "Title — what it asks."
    path.write_text("# A sentence that\n# goes on. And on.\n")
    assert first_comment(path) == "A sentence that goes on."
    path.write_text("# " + "x" * 200 + "\n")
    assert len(first_comment(path)) == 100 and first_comment(path).endswith("…")


def test_help_text_has_no_interpolations() -> None:
    """Hydra runs the template through OmegaConf and string.Template: no ``${`` or ``$``."""
    assert "$" not in help_template(CONF, RunConfig)


def test_help_speaks_plainly_and_lists_every_command(start_cli, tmp_path) -> None:
    from runner.config.help import COMMANDS

    run = start_cli(["--help"], tmp_path).wait()
    assert "issue" not in run.stdout.lower()
    for module in ("runner.resume", "runner.check", "runner.claims.report", "runner.history",
                   "runner.compare", "runner.report", "runner.collect"):
        assert f"python -m {module}\n" in run.stdout, module
    assert {module for module, *_ in COMMANDS} >= {"runner", "runner.history"}


def test_op_help_lists_its_parameters_types_and_choices(start_cli, tmp_path) -> None:
    run = start_cli(["op=batched_dot", "--help"], tmp_path).wait()
    assert run.returncode == 0, run.explain()
    assert "== Op batched_dot" in run.stdout
    assert "impl           one of mul_sum | bmm | einsum (default mul_sum)" in run.stdout
    linear = start_cli(["op=linear", "--help"], tmp_path / "l").wait()
    assert "bias           bool (default" in linear.stdout
    assert "== Ops" in run.stdout  # the rest of the page follows


def test_every_command_in_help_is_a_console_script() -> None:
    import importlib

    from runner.config.help import COMMANDS

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((CONF.parent / "pyproject.toml").read_text())
    scripts = pyproject["project"]["scripts"]
    for module, script, *_ in COMMANDS:
        path, _, name = scripts[script].partition(":")
        assert path == (module if module != "runner" else "runner.__main__"), script
        if module != "runner":  # importing runner.__main__ registers Hydra's schema
            assert callable(getattr(importlib.import_module(path), name)), script


def test_the_docs_name_every_op_and_every_experiment() -> None:
    """The README names every experiment; docs/ops.md, which the README links, every op."""
    homes = {"op": "docs/ops.md", "experiment": "README.md"}
    for group, home in homes.items():
        text = (CONF.parent / home).read_text(encoding="utf-8")
        for path in sorted(CONF.glob(f"{group}/*.yaml")):
            assert f"`{path.stem}`" in text, f"{home} never names {group} {path.stem}"


def test_the_product_speaks_to_users_not_to_its_history() -> None:
    """No process words (issue numbers) or unexplained tutorial numbers in what users read."""
    import re

    root = CONF.parent
    files = [root / "README.md", *root.glob("docs/*.md"), *root.glob("conf/**/*.yaml"),
             *root.glob("runner/**/*.py"), *root.glob("ops/*.py")]
    words = re.compile(r"\bissues? \d+|\bfoundation issue\b|\bseeds? \d{3}\b", re.IGNORECASE)
    found = [f"{path.relative_to(root)}: {m.group(0)}" for path in files
             for m in words.finditer(path.read_text(encoding="utf-8"))]
    assert not found, found


@pytest.mark.cli
def test_the_installed_opsweep_script_finds_its_config_from_any_folder(tmp_path) -> None:
    import subprocess
    import sys

    script = Path(sys.executable).parent / "opsweep"
    if not script.is_file():
        pytest.skip("opsweep is not installed in this environment (pip install -e .)")
    out = subprocess.run([str(script), "op=add", "--help"], cwd=tmp_path, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "== Op add" in out.stdout and "== Experiments" in out.stdout
