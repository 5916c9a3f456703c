"""``python -m runner --help`` speaks opsweep: ops, experiments, timer presets, axes, settings."""

from __future__ import annotations

from pathlib import Path

from runner.config.help import first_comment, help_template
from runner.config.schema import RunConfig
from runner.core.axes import AXES

CONF = Path(__file__).resolve().parent.parent / "conf"


def test_help_lists_every_op_experiment_preset_and_axis(start_cli, tmp_path) -> None:
    run = start_cli(["--help"], tmp_path).wait()
    assert run.returncode == 0, run.explain()
    for group in ("op", "experiment", "timer"):
        for path in CONF.glob(f"{group}/*.yaml"):
            assert f"  {path.stem} " in run.stdout, f"{group} {path.stem} missing from --help"
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
