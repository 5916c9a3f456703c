"""What a sweep stopped by Ctrl-C says (runner.execution.callbacks): each thing once."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from runner.execution import callbacks, interrupt


def test_a_ctrl_c_with_nothing_to_merge_says_so_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Ctrl-C before any trial ended: the sweep's end merges nothing, says so, and exits
    130 without merging (and saying it) a second time."""
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    monkeypatch.setattr(interrupt, "requested", lambda: True)
    monkeypatch.setattr(interrupt, "ignore", lambda: None)  # keep this process's handlers
    with pytest.raises(SystemExit) as exit_:
        callbacks.MergeResults._finish(OmegaConf.create({"lock_wait_s": 0}), sweep_dir)
    assert exit_.value.code == interrupt.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert err.count("no trial results") == 1, err
    assert "Continue with: python -m runner.resume" in " ".join(err.split())


def test_a_job_stopped_by_ctrl_c_merges_what_finished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    merged: list[Path] = []
    monkeypatch.setattr(callbacks, "finish_sweep", merged.append)
    monkeypatch.setattr(interrupt, "ignore", lambda: None)
    with pytest.raises(SystemExit):
        callbacks.stopped(tmp_path, tmp_path / "jobs" / "0")
    assert merged == [tmp_path]
