"""One Hydra job: validate its config, expand it into trials, run them, write one file."""

from __future__ import annotations

import gc
import shutil
import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from runner import console
from runner.cli import fail
from runner.config.errors import ConfigError
from runner.config.planner import plan_job
from runner.execution.insight import InsightOptions
from runner.execution.trial import run_trial
from runner.storage.files import FORMAT_VERSION, JOB_FILE, rows_to_table, write_new


def run_job(cfg: DictConfig) -> Path | None:
    """Hydra's task function. Returns the job's result file.

    Bad configuration exits with status 2 before any trial runs. A failing trial never stops
    the job: it becomes a row.
    """
    # Everything imported so far (torch, inductor) lives for the whole process: move it out of
    # the garbage collector's generations so the per-trial gc.collect() in execute._release
    # scans only what trials allocate (~0.3 s per collection otherwise).
    gc.freeze()
    hydra_cfg = HydraConfig.get()
    job_dir = Path(hydra_cfg.runtime.output_dir)
    try:
        planned = plan_job(cfg)
    except ConfigError as exc:
        _discard_empty_job_dir(job_dir)
        fail(exc)

    sweep_dir = job_dir.parent.parent
    job_num = OmegaConf.select(hydra_cfg, "job.num", default=0) or 0
    overrides = list(hydra_cfg.overrides.task)
    title = f"job {job_num}" + (f" ({' '.join(overrides)})" if overrides else "")

    timer = smoke_timer() if cfg.smoke else cfg.timer
    if cfg.gpu_warmup_s > 0 and not cfg.smoke:
        _heat_devices(planned, cfg.gpu_warmup_s)
    try:
        insight = InsightOptions.from_config(cfg, job_dir)
    except ValueError as exc:
        _discard_empty_job_dir(job_dir)
        fail(exc)
    rows = []
    for trial in console.track(planned, title, label=lambda t: t.spec.label()):
        row = run_trial(trial.spec, trial.op, timer, check_accuracy=cfg.check_accuracy,
                        insight=insight)
        row.update(sweep_id=sweep_dir.name, job_num=job_num, trial_index=trial.index,
                   shard=cfg.shard, num_shards=cfg.num_shards)
        rows.append(row)

    metadata: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "sweep_id": sweep_dir.name,
        "job_num": job_num,
        "overrides": overrides,
        "choices": OmegaConf.to_container(hydra_cfg.runtime.choices),
        "config": OmegaConf.to_yaml(cfg, resolve=True),
        "argv": sys.argv,
    }
    table = _with_roofline(rows_to_table(rows, metadata), cfg.results_dir)
    return write_new(table, job_dir / JOB_FILE)


def _heat_devices(planned: list, seconds: float) -> None:
    """Bring every CUDA device the job uses to its sustained-load state (see
    ``runner.timing.timer.heat_device``)."""
    from runner.timing.timer import heat_device

    for device in dict.fromkeys(t.spec.device for t in planned):
        if device.startswith("cuda"):
            console.stderr.print(f"heating {device} for {seconds:g} s (gpu_warmup_s)")
            heat_device(device, seconds)


def _discard_empty_job_dir(job_dir: Path) -> None:
    """Hydra makes the job folder before the config can be checked; when the config is bad,
    remove what Hydra wrote (its .hydra record) so a failed start leaves no empty sweep behind.
    Only folders holding no result file are touched."""
    if (job_dir / JOB_FILE).exists():
        return
    shutil.rmtree(job_dir / ".hydra", ignore_errors=True)
    for folder in (job_dir, job_dir.parent, job_dir.parent.parent):
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            break


def smoke_timer() -> DictConfig:
    """The ``conf/timer/smoke.yaml`` preset on top of the schema defaults."""
    from runner.config.ops import CONF_DIR
    from runner.config.schema import TimerSettings

    return OmegaConf.merge(OmegaConf.structured(TimerSettings),
                           OmegaConf.load(CONF_DIR / "timer" / "smoke.yaml"))


def _with_roofline(table: Any, results_root: str) -> Any:
    """Append pct_of_peak / bound columns (runner.analysis.roofline): results need no manual
    step."""
    try:
        from runner.analysis import roofline
    except ImportError:
        return table
    import pyarrow as pa

    annotated = roofline.annotate(table.to_pandas(), results_root=results_root)
    for name in ("pct_of_peak", "bound", "roofline_source", "roofline_reason"):
        if name in annotated and name not in table.column_names:
            table = table.append_column(name, pa.Array.from_pandas(annotated[name]))
    return table
