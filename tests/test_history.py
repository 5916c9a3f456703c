"""``runner.history``: each trial's time across sweeps, a step flagged with compare's rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic import CPU, make_trials, scaled, write_sweep

from runner.analysis.history import history, main

SPECS = [{"op": "matmul", "shape": (n, n, n), "median_us": 10.0 * n} for n in (32, 64)] + \
        [{"op": "add", "shape": (4096,), "median_us": 5.0}]


def _sweep(root: Path, base: pd.DataFrame, index: int, *, slower: int | None = None) -> Path:
    """Sweep ``index`` of the base trials (fresh noise), one trial 20% slower if asked."""
    df = scaled(base, 1.0, sweep_id=f"2026-01-0{index + 1}_00-00-00.000000", seed=index)
    df["timestamp"] = pd.Timestamp(f"2026-01-0{index + 1}", tz="UTC")
    df["git_commit"] = f"{index}" * 40
    if slower is not None:
        df.at[slower, "samples_us"] = (np.asarray(df.at[slower, "samples_us"]) * 1.2).tolist()
        for column in ("time_median_us", "time_ci_low_us", "time_ci_high_us"):
            df.at[slower, column] = df.at[slower, column] * 1.2
    return write_sweep(root, df)


@pytest.fixture
def three_sweeps(tmp_path: Path) -> list[Path]:
    base = make_trials(SPECS, env=CPU, sweep_id="base")
    # written newest first: the order comes from the timestamps, not the arguments
    return [_sweep(tmp_path, base, 2, slower=1), _sweep(tmp_path, base, 0),
            _sweep(tmp_path, base, 1)]


def test_a_trial_that_got_20_percent_slower_is_flagged_and_fails(three_sweeps, tmp_path,
                                                                  capsys) -> None:
    out = tmp_path / "history"
    assert main([*map(str, three_sweeps), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "step: matmul 64x64x64: slower +20.0% at 2222222" in err
    assert err.count("step:") == 1  # the noise of the other steps is not a change
    assert (out / "history_matmul.png").stat().st_size > 0
    assert (out / "history_add.png").is_file()
    points = pd.read_csv(out / "history.csv", dtype={"commit": str})
    assert len(points) == 9 and set(points["time"]) == {"loop"}  # CPU: the loop time
    commits = points[points["trial"] == "add 4096"]["commit"]
    assert list(commits) == ["0000000", "1111111", "2222222"]


@pytest.mark.slow
def test_steady_sweeps_pass_and_never_only_reports(three_sweeps, tmp_path) -> None:
    assert main([*map(str, three_sweeps[1:]), "--out", str(tmp_path / "a")]) == 0
    assert main([*map(str, three_sweeps), "--out", str(tmp_path / "b"), "--fail-on",
                 "never"]) == 0


def test_device_time_is_followed_where_every_point_has_one(three_sweeps) -> None:
    from runner.storage.load import load

    df = load([str(p) for p in three_sweeps])
    df["gpu_time_median_us"] = df["time_median_us"] * 0.5
    df["gpu_time_samples_us"] = [list(np.asarray(s) * 0.5) for s in df["samples_us"]]
    result = history(df)
    assert set(result.points["time"]) == {"device"}
    assert result.steps()["trial"].tolist() == ["matmul 64x64x64"]


def test_results_without_a_timed_trial_are_a_clean_error(tmp_path, capsys) -> None:
    failed = make_trials([{"op": "add", "status": "error"}], env=CPU, sweep_id="x")
    with pytest.raises(SystemExit) as exc:
        main([str(write_sweep(tmp_path, failed))])
    assert exc.value.code == 2 and "no timed (ok) trial" in capsys.readouterr().err


def _no_git(df: pd.DataFrame) -> pd.DataFrame:
    """As an installed wheel writes rows: no git, so no commit."""
    return df.assign(git_commit=None, git_dirty=None)


def test_a_wheel_install_without_git_names_sweeps_by_their_start(three_sweeps, tmp_path,
                                                                  capsys) -> None:
    from runner.analysis.history import plot_history
    from runner.storage.load import load

    result = history(_no_git(load([str(p) for p in three_sweeps])))
    assert set(result.points["commit"]) == {""}
    (figure,) = [f for name, f in plot_history(result).items() if name == "matmul"]
    ticks = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert ticks == ["2026-01-01 00:00", "2026-01-02 00:00", "2026-01-03 00:00"]
    assert figure.axes[0].get_xlabel() == "sweep (start time)"
    step = result.trials.set_index("trial").loc["matmul 64x64x64", "steps"]
    assert step == "slower +20.0% at sweep 2026-01-03_00-00-00.000000"
    assert "?" not in result.trials["steps"].str.cat()


def test_trials_that_never_shared_a_sweep_are_apart_and_the_table_reads_like_compare(
        three_sweeps, tmp_path, capsys) -> None:
    """A sweep over num_threads of another experiment: its trials get a table and a plot of
    their own, never a line or an axis shared with the nightly trials; times are written
    like compare's (209 ms, 2.17 s), not 2.09e+05."""
    threads = make_trials([{"op": "matmul", "shape": (64, 64, 64), "num_threads": n,
                            "median_us": 209_000.0 * n} for n in (2, 4)], env=CPU,
                          sweep_id="2026-01-09_00-00-00.000000")
    threads["trial_id"] = ["threads2", "threads4"]  # num_threads is part of a real trial_id
    threads["timestamp"] = pd.Timestamp("2026-01-09", tz="UTC")
    out = tmp_path / "history"
    assert main([*map(str, three_sweeps), str(write_sweep(tmp_path, threads)), "--out",
                 str(out)]) == 1
    stdout = capsys.readouterr().out
    assert "group 1 of 2: 3 trial(s) over 3 sweep(s)" in stdout
    assert "group 2 of 2: 2 trial(s) over 1 sweep(s)" in stdout
    assert "418 ms" in stdout and "836 ms" in stdout and "e+0" not in stdout
    assert sorted(p.name for p in out.glob("*.png")) == [
        "history_add.png", "history_matmul_1.png", "history_matmul_2.png"]
    points = pd.read_csv(out / "history.csv")
    assert set(points[points["trial_id"].isin(["threads2", "threads4"])]["group"]) == {2}
    assert set(points[~points["trial_id"].isin(["threads2", "threads4"])]["group"]) == {1}


def test_lines_follow_trials_even_where_two_share_a_label(three_sweeps) -> None:
    from runner.analysis.history import plot_history
    from runner.storage.load import load

    df = load([str(p) for p in three_sweeps])
    twin = df[df["op"] == "add"].assign(trial_id="another", hostname="twin")  # no label tells
    result = history(pd.concat([df, twin], ignore_index=True))
    (ax,) = plot_history(result)["add"].axes
    assert len(ax.lines) == 2 and all(len(line.get_xdata()) == 3 for line in ax.lines)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(set(texts)) == 2 and any("[another]" in t for t in texts), texts


def test_one_sweep_is_the_first_point_of_a_history(three_sweeps, tmp_path, capsys) -> None:
    from runner.analysis.history import build_parser

    assert "one sweep or more" in build_parser().format_help()
    assert main([str(three_sweeps[1]), "--out", str(tmp_path / "h")]) == 0
    assert "one sweep: the first point of each trial's history" in capsys.readouterr().err


def test_a_lone_trial_is_named_by_its_op_and_shape(three_sweeps) -> None:
    from runner.storage.load import load

    df = load([str(p) for p in three_sweeps])
    result = history(df[df["op"] == "add"])
    assert list(result.trials["trial"]) == ["add 4096"]  # nothing varies: not "(all)"
