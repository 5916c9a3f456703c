"""A results file is data: reading, checking or reporting one never imports or calls code it
names. Claims that compute (``_target_``) come from experiment configs, never a file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runner.storage.files import METADATA_KEY, rows_to_table, write_new

CRAFTED_CONFIG = """\
expect:
  - claim: runs a shell command
    _target_: os.system
    at_least: 1
  - claim: imports a module with side effects
    _target_: sidefx.judge
    at_least: 1
"""


def crafted(tmp_path: Path, experiment: str = "evil") -> Path:
    """A sweep whose metadata names ``os.system`` and a module that writes a file on import."""
    (tmp_path / "sidefx.py").write_text(
        "from pathlib import Path\nPath('IMPORTED').write_text('ran')\n"
        "def judge(rows, claim):\n    return 1.0\n")
    rows = [{"sweep_id": "s", "job_num": 0, "trial_index": 0, "trial_id": "t0", "status": "ok",
             "op": "matmul", "device": "cpu", "dtype": "fp32", "time_per_op_us": 1.0}]
    meta = {"format_version": 1, "jobs": [{"job_num": 0, "choices": {"experiment": experiment},
                                           "config": CRAFTED_CONFIG}]}
    table = rows_to_table(rows, {}).replace_schema_metadata({METADATA_KEY: json.dumps(meta)})
    return write_new(table, tmp_path / "results" / "s" / "results.parquet")


def run(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    from conftest import cli_env

    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=cli_env(),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.fast_sample(every=3)
@pytest.mark.parametrize("command", [
    ("runner.check",), ("runner.check", "--claims-from", "results"),
    ("runner.claims.report",)])
def test_a_crafted_results_file_runs_nothing(tmp_path: Path, command: tuple) -> None:
    path = crafted(tmp_path)
    done = run(*command, str(path), cwd=tmp_path)
    assert not (tmp_path / "IMPORTED").exists(), done.stderr
    assert "Traceback" not in done.stderr
    if "--claims-from" in command:  # asked to judge by the file's claims: refused, named
        assert done.returncode == 2 and "os.system" in done.stderr, done.stderr


def test_an_experiment_name_from_a_file_never_leads_outside_the_config_folder(
        tmp_path: Path) -> None:
    from runner.claims.results import experiment_yaml

    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "ok.yaml").write_text("expect: []\n")
    (tmp_path / "outside.yaml").write_text("expect: []\n")
    assert experiment_yaml(conf, "ok") == (conf / "experiment" / "ok.yaml").resolve()
    assert experiment_yaml(conf, "../../outside") is None


def test_load_reads_a_crafted_file_as_data(tmp_path: Path, monkeypatch) -> None:
    import runner

    path = crafted(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert len(runner.load(path)) == 1 and "sidefx" not in sys.modules
    assert not (tmp_path / "IMPORTED").exists()
