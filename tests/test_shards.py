"""``shard=i num_shards=n``: one job's trials split over n Hydra jobs, merged into one file."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from runner.config.planner import check_shard
from runner.core.errors import ConfigError

SWEEP = ["op=matmul", "device=cpu", "smoke=true", "check_accuracy=false",
         "shape=[[4,4,4],[8,8,8],[16,16,16]]", "dtype=[fp32,fp64]", "seed=[0,1]"]  # 12 trials


def _rows(sweep_dir: Path) -> list[dict]:
    return pq.read_table(sweep_dir / "results.parquet").to_pylist()


@pytest.mark.slow
def test_three_shards_give_exactly_the_unsharded_trial_set(start_cli, tmp_path) -> None:
    whole = start_cli([*SWEEP, "sweep_id=whole"], tmp_path)
    sharded = start_cli([*SWEEP, "shard=range(3)", "num_shards=3", "sweep_id=sharded", "-m"],
                        tmp_path)
    assert whole.wait().returncode == 0, whole.explain()
    assert sharded.wait().returncode == 0, sharded.explain()
    expected = _rows(tmp_path / "results" / "whole")
    got = _rows(tmp_path / "results" / "sharded")
    assert len(expected) == 12
    assert Counter(r["trial_id"] for r in got) == Counter(r["trial_id"] for r in expected)
    # each trial keeps its index in the unsharded plan, and its job's shard is recorded
    by_id = {r["trial_id"]: r["trial_index"] for r in expected}
    assert all(r["trial_index"] == by_id[r["trial_id"]] for r in got)
    assert sorted({(r["job_num"], r["shard"]) for r in got}) == [(0, 0), (1, 1), (2, 2)]
    assert {r["num_shards"] for r in got} == {3}
    # round-robin: shard i holds the trials whose index is i modulo 3
    assert all(r["trial_index"] % 3 == r["shard"] for r in got)


@pytest.mark.parametrize(("shard", "num_shards", "message"), [
    (3, 3, "it must be in 0..2"),
    (-1, 2, "'shard': -1. Expected an integer >= 0"),
    (0, 0, "'num_shards': 0. Expected an integer >= 1"),
    ("a", 2, "'shard': 'a'"),
])
def test_bad_shards_name_the_key_and_the_fix(shard, num_shards, message) -> None:
    with pytest.raises(ConfigError, match="shard='range"):
        check_shard(shard, num_shards)
    with pytest.raises(ConfigError) as err:
        check_shard(shard, num_shards)
    assert message in str(err.value)


def test_a_shard_out_of_range_fails_before_any_job(start_cli, tmp_path) -> None:
    run = start_cli(["op=matmul", "device=cpu", "shard=range(4)", "num_shards=3", "-m"],
                    tmp_path).wait()
    assert run.returncode == 2
    assert "invalid value for 'shard': 3" in run.err
    assert not (tmp_path / "results").exists()
