"""One Hydra job: validate its config, expand it into trials, run them, write one file.

Each trial is one frozen :class:`~runner.execution.task.TrialTask` (spec, the one timer the
job chose, accuracy and insight options), built once; whoever runs it gets it unchanged: the
supervised worker process (``runner.execution.worker``), N of them (``workers=N``,
``runner.execution.pool``) or, with ``isolation=none``, this process. Each row is journaled
(``runner.storage.journal``) as its trial ends; ``trials.parquet`` is built from the journal
when the job ends (or is stopped by Ctrl-C)."""

from __future__ import annotations

import gc
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from runner import console
from runner.cli import fail
from runner.config import schema, sweep_size
from runner.config.guards import check_job
from runner.config.planner import plan_job, recall
from runner.core.errors import ConfigError
from runner.execution import costs, job_file, launched, order, pool, timeline, worker
from runner.execution.insight import InsightOptions
from runner.execution.interrupt import GracefulStop
from runner.execution.task import TrialTask, TrialTimer
from runner.storage import journal, lock
from runner.storage.files import FORMAT_VERSION
from runner.storage.layout import JOB_FILE, RESUME_ENV, has_results


def run_job(cfg: DictConfig) -> Path | None:
    """Hydra's task function: plan the job's trials, choose who runs them, run them (each row
    journaled as it ends), write the job file. Returns the job's result file.

    Bad configuration exits with status 2 before any trial runs. A failing trial never stops
    the job: it becomes a row.
    """
    # Everything imported so far (torch, inductor) lives for the whole process: move it out of
    # the garbage collector's generations so the per-trial gc.collect() in
    # runner.execution.trial._release scans only what trials allocate (~0.3 s per collection
    # otherwise).
    gc.freeze()
    timeline.job_started()  # start-up accounting: Hydra has composed this job
    job = Job.from_hydra()
    launched.prestart_worker(cfg, job.where["launcher"])  # usually done: runner.__main__
    planned, insight, workers = _plan(cfg, job)
    timeline.mark("planned")
    timer = trial_timer(cfg)  # the one the trials run with, and the one the file records
    if HydraConfig.get().mode != RunMode.MULTIRUN:  # a multirun's size: runner.config.preflight
        console.stderr.print(sweep_size.size_line([len(planned)], timer.settings()),
                             highlight=False)
    runner_ = _choose_runner(cfg, workers)
    job.metadata = _metadata(cfg, job, timer)
    tasks = [TrialTask(trial.index, trial.spec, timer, cfg.check_accuracy, insight,
                       cfg.get("trial_timeout_s") or None) for trial in _todo(planned, job)]
    fresh = not (job.dir / JOB_FILE).exists() and journal.count_entries(job.dir) == 0
    job.held = [] if fresh else None
    if tasks and _out_of_process(runner_):
        # usually started by __main__ already; each worker warms the job's devices (a pool's
        # worker: its own GPU) unless it was already asked to warm exactly those
        runner_.prestart(pool.warm_devices(tasks))
    stop = _run_trials(cfg, job, runner_, tasks, workers)
    if stop.requested:  # a Ctrl-C may have come between a row's journal line and its holding
        job.held = None
    # evidence for the isolation design: the driver must never have created a CUDA context
    torch = sys.modules.get("torch")
    job.metadata["driver_cuda_initialized"] = bool(torch is not None
                                                   and torch.cuda.is_initialized())
    job.metadata["isolation"] = cfg.isolation
    job.metadata["workers"] = len(workers.slots)
    job.metadata["startup"] = timeline.startup()  # command → first trial, in parts (job 0)
    journal.close(job.dir)  # fsync the rows' batch before the job file counts on them
    path = job_file.write(job.dir, job.metadata, cfg.results_dir, job.held)
    if stop.requested:
        _stopped(job.sweep_dir, job.dir)
    return path


@dataclass
class Job:
    """Where one Hydra job writes, who it is in its sweep, and the metadata of its files."""

    dir: Path
    sweep_dir: Path
    num: int
    overrides: list[str]
    resuming: bool
    metadata: dict[str, Any] = field(default_factory=dict)
    #: launcher, launcher_job_id, node, job_pid: the same in every row (runner.execution.launched)
    where: dict[str, Any] = field(default_factory=dict)
    #: The rows this process journaled, while they are the whole journal (a job that started
    #: with none): the job file is built from them, not read back. ``None`` otherwise.
    held: list[dict[str, Any]] | None = None

    @classmethod
    def from_hydra(cls) -> Job:
        hydra_cfg = HydraConfig.get()
        job_dir = Path(hydra_cfg.runtime.output_dir)
        target = OmegaConf.select(hydra_cfg, "launcher._target_", default=None)
        return cls(job_dir, job_dir.parent.parent,
                   OmegaConf.select(hydra_cfg, "job.num", default=0) or 0,
                   list(hydra_cfg.overrides.task), os.environ.get(RESUME_ENV) == "1",
                   where=launched.where(target))

    @property
    def name(self) -> str:
        return f"job {self.num}"

    @property
    def title(self) -> str:
        return self.name + (f" ({' '.join(self.overrides)})" if self.overrides else "")


def _metadata(cfg: DictConfig, job: Job, timer: TrialTimer) -> dict[str, Any]:
    """What every file of the job records about how it was run; its ``config`` holds the
    timer the trials ran with (``smoke=true``: the smoke preset, not the composed one)."""
    return {
        "format_version": FORMAT_VERSION,
        "sweep_id": job.sweep_dir.name,
        "job_num": job.num,
        "overrides": job.overrides,
        "choices": OmegaConf.to_container(HydraConfig.get().runtime.choices),
        "config": schema.recorded_yaml(cfg, "timer", timer.settings()),
        "argv": sys.argv,
    }


def _plan(cfg: DictConfig, job: Job) -> tuple[list, InsightOptions, Any]:
    """The job's trials, insight options and worker slots; bad configuration exits 2 here,
    before any trial, leaving no empty sweep folder behind."""
    try:
        # planned once: by the pre-flight, or here (a job checked by its values only)
        planned = recall(job.overrides) or plan_job(cfg)
        check_job(cfg, planned, job.dir, resuming=job.resuming)
        insight = InsightOptions.from_config(cfg, job.dir)
        # the two keys it reads, not the whole config (5000 shapes: ~0.2 s)
        pinning = OmegaConf.to_container(OmegaConf.masked_copy(cfg, ["device", "cases"]))
        workers = pool.plan_workers(cfg.workers, cfg.isolation, planned,
                                    pool.explicit_gpus(pinning))
    except (ConfigError, ValueError) as exc:
        _discard_empty_job_dir(job.dir)
        fail(exc)
    return planned, insight, workers


def _choose_runner(cfg: DictConfig, workers: Any) -> Any:
    """A pool of workers, the one supervised worker process, or this process
    (``isolation=none``); the ones not chosen are stopped."""
    if len(workers.slots) > 1:
        worker.supervisor().stop()  # started early by __main__: the pool has its own
        return pool.pool(workers.slots)
    if cfg.isolation == "process":
        pool.stop_pool()  # an earlier job of the multirun had workers>1
        return worker.supervisor()
    pool.stop_pool()
    worker.supervisor().stop()  # started early by __main__ (an experiment chose none)
    return worker.InProcess()


def _out_of_process(runner_: Any) -> bool:
    """Whether the trials run in worker processes (one supervised worker or a pool), not in
    this one (``isolation=none``)."""
    return isinstance(runner_, (worker.Supervisor, pool.Pool))


def _todo(planned: list, job: Job) -> list[Any]:
    """The trials to run: all, or on resume those without a done row."""
    done = journal.done_trials(job.dir) if job.resuming else {}
    todo = [trial for trial in planned if done.get(trial.index) != trial.spec.trial_id]
    if job.resuming:
        console.stderr.print(f"job {job.num}: resuming {len(todo)} of {len(planned)} trials")
    return todo


def _run_trials(cfg: DictConfig, job: Job, runner_: Any, tasks: list[TrialTask],
                workers: Any) -> GracefulStop:
    """Run the tasks, journaling each row as it ends; Ctrl-C stops after the trial in flight
    (twice: now). Returns the stop state."""
    heat_s = cfg.gpu_warmup_s if not cfg.smoke else 0.0

    def record(row: dict[str, Any], task: TrialTask) -> None:
        row.setdefault("worker", 0 if isinstance(runner_, worker.Supervisor) else None)
        row.update(sweep_id=job.sweep_dir.name, job_num=job.num, trial_index=task.index,
                   shard=cfg.shard, num_shards=cfg.num_shards,
                   experiment=job.metadata.get("choices", {}).get("experiment"), **job.where)
        _journal(job.dir, row, job.metadata)
        if job.held is not None:
            job.held.append(row)

    with GracefulStop() as stop:
        if _out_of_process(runner_):
            job_file.import_ahead()  # while the workers import torch: see runner.execution.job_file
        try:
            if isinstance(runner_, pool.Pool):
                with console.progress(len(tasks), job.title, job.name) as advance:
                    runner_.run(tasks, workers.pinned, stop=stop, heat_s=heat_s,
                                costs=costs.for_tasks(tasks, cfg.results_dir),
                                record=lambda row, task: (record(row, task),
                                                          advance(task.spec.label())))
                job.metadata["estimated_worker_s"] = [  # the placement's estimate, per worker
                    round(s, 3) for s in runner_.assignment.loads_s]
            else:
                # a Ctrl-C before the first trial runs neither the heat nor any trial
                if heat_s > 0 and tasks and not stop.requested:
                    _heat_devices(runner_, tasks, heat_s)
                ordered = order.one_worker_order(tasks, cfg.trial_order)
                for task in console.track(ordered, job.title, label=lambda t: t.spec.label(),
                                          name=job.name):
                    if stop.requested:
                        break
                    record(runner_.run(task), task)
        except KeyboardInterrupt:  # the second Ctrl-C: stop now
            if _out_of_process(runner_):
                runner_.stop()
            stop.count = max(stop.count, 2)
    return stop


def _journal(job_dir: Path, row: dict[str, Any], metadata: dict[str, Any]) -> None:
    """Journal one row; a failed write (a full disk) stops the sweep with exit status 1: going
    on would measure trials whose results cannot be kept."""
    try:
        journal.write_row(job_dir, row, metadata)
    except OSError as exc:
        print(f"opsweep: error: could not write the result of trial {row['trial_index']} to "
              f"{journal.journal_dir(job_dir)}: {exc}. Free space or fix permissions, then "
              f"python -m runner.resume {job_dir.parent.parent}", file=sys.stderr)
        raise SystemExit(1) from None


def _stopped(sweep_dir: Path, job_dir: Path) -> None:
    """After Ctrl-C: merge what finished, say where it is and how to go on, exit 130."""
    from runner.execution.callbacks import stopped

    stopped(sweep_dir, job_dir)


def _heat_devices(runner_: Any, planned: list, seconds: float) -> None:
    """Bring every CUDA device the job uses to its sustained-load state (see
    ``runner.timing.heat.heat_device``), in the process that runs the trials."""
    for device in dict.fromkeys(t.spec.device for t in planned):
        if device.startswith("cuda"):
            console.stderr.print(f"heating {device} for {seconds:g} s (gpu_warmup_s)")
            runner_.heat(device, seconds)


def _discard_empty_job_dir(job_dir: Path) -> None:
    """Hydra makes the job folder before the config can be checked; when the config is bad,
    remove what Hydra wrote (its .hydra record) so a failed start leaves no empty sweep behind.
    Only folders holding no result file are touched."""
    if has_results(job_dir):
        lock.release(job_dir.parent.parent)
        return
    shutil.rmtree(job_dir / ".hydra", ignore_errors=True)
    for folder in (job_dir, job_dir.parent, job_dir.parent.parent, job_dir.parent.parent.parent):
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            break
    lock.release(job_dir.parent.parent)  # and the folders made only to hold the sweep's lock


def trial_timer(cfg: DictConfig) -> TrialTimer:
    """The timer a job's trials run with: its ``timer`` node, or with ``smoke=true`` the
    ``conf/timer/smoke.yaml`` preset on top of the schema defaults."""
    if not cfg.smoke:
        return TrialTimer.from_settings(cfg.timer)
    from runner.config.ops import CONF_DIR
    from runner.config.schema import TimerSettings

    return TrialTimer.from_settings(OmegaConf.merge(
        OmegaConf.structured(TimerSettings), OmegaConf.load(CONF_DIR / "timer" / "smoke.yaml")))
