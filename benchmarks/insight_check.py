"""GPU checks of profile=true / energy=true  and the bf16 8192³ bimodality probe
, in one script for one call of the GPU machine:

    python benchmarks/insight_check.py --out $OUT            # on the GPU machine
    python benchmarks/insight_check.py --out /tmp/x --dry-run  # on a CPU: tiny, every step

Steps (each prints a table; all result files are packed into OUT/results.tgz):

1. kernels + no-effect, in ONE process: a 25-iteration pointwise chain on 2^20 floats and a
   bf16 8192³ matmul, each run off / on / off / on (profile and energy), so the timed
   medians with the passes on and off are compared within one process. Checks
   kernel_count = 100 (chain) and 1 (matmul), kernel_time_sum ≤ device time.
2. probe: PROCESSES separate `python -m runner` processes of the bf16 8192³ matmul (two
   trials each, seeds 0 and 1) with profile and energy: per trial the kernel that ran,
   the timed median, the SM clock right after the samples and during the energy window,
   and energy_per_call_mJ (whose spread across processes is the energy repeatability).
3. experiment: `-m experiment=energy_efficiency energy_window_s=SHORT,SUSTAINED`, its table,
   and `python -m runner.report` on it (the energy plot).
4. cupti: the chain timed off, off, profile, off, off, energy, off, off in one process, in two
   processes: TEARDOWN_CUPTI=0 (CUPTI stays attached after profiling) and the default
   (profiling.py sets TEARDOWN_CUPTI=1). Shows whether a pass changes *later* timings.
5. settle: the probe again with timer.warmup_s=SETTLE_S (a settling warm-up) and profile
   only: do the bf16 8192³ modes disappear when the samples start in the capped state?
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
CHAIN = ["op=pointwise_chain", "op.iterations=25", "dtype=fp32"]
MATMUL = ["op=matmul", "dtype=bf16"]


def sizes(dry: bool) -> dict:
    if dry:
        return {"chain": "shape=[4096]", "mm": "shape=[256,256,256]", "window": 0.5,
                "idle": 0.2, "short": 0.5, "sustained": 1.0, "device": "device=cpu",
                "processes": 2, "settle": 0.2}
    return {"chain": "shape=[1048576]", "mm": "shape=[8192,8192,8192]", "window": 4.0,
            "idle": 0.5, "short": 1.5, "sustained": 15.0, "device": "device=auto",
            "processes": 6, "settle": 1.5}


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from runner.config import schema

    schema.register()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def step_kernels(s: dict, results: Path) -> pd.DataFrame:
    """Off / on / off / on in this process, for the chain and the matmul."""
    from runner.config.planner import plan_job
    from runner.execution.insight import InsightOptions
    from runner.execution.trial import run_trial

    rows = []
    for name, overrides in (("chain", CHAIN + [s["chain"]]),
                            ("matmul", MATMUL + [s["mm"], *s["matmul_extra"]])):
        cfg = compose(overrides + [s["device"], "profile=true", "energy=true",
                                   f"energy_window_s={s['window']}",
                                   f"energy_idle_s={s['idle']}"])
        [trial] = plan_job(cfg)
        options = InsightOptions.from_config(cfg, results / "inproc" / "jobs" / "0")
        for rep, on in ((0, False), (0, True), (1, False), (1, True)):
            row = run_trial(trial.spec, trial.op, cfg.timer, insight=options if on else None)
            row.update(case=name, rep=rep, insight="on" if on else "off")
            rows.append(row)
    df = pd.DataFrame(rows)
    df.to_parquet(results / "inproc.parquet")
    return df


def step_sequence(s: dict, results: Path, tag: str) -> pd.DataFrame:
    """The chain timed with no pass, then after a profile pass, then after an energy pass."""
    from runner.config.planner import plan_job
    from runner.execution.insight import InsightOptions
    from runner.execution.trial import run_trial

    cfg = compose(CHAIN + [s["chain"], s["device"], "energy_window_s=1.0", "energy_idle_s=0"])
    [trial] = plan_job(cfg)
    job = results / f"sequence-{tag}" / "jobs" / "0"
    plan = [("off", None), ("off", None),
            ("profile", InsightOptions(profile=True, job_dir=job)), ("off", None),
            ("off", None), ("energy", InsightOptions(energy=True, energy_window_s=1.0,
                                                     energy_idle_s=0.0, job_dir=job)),
            ("off", None), ("off", None)]
    rows = []
    for i, (name, options) in enumerate(plan):
        row = run_trial(trial.spec, trial.op, cfg.timer, insight=options)
        rows.append({"teardown": tag, "step": i, "pass": name,
                     "time_median_us": row["time_median_us"], "status": row["status"]})
    df = pd.DataFrame(rows)
    df.to_parquet(results / f"sequence-{tag}.parquet")
    return df


def step_cupti(results: Path, log: Path, dry: bool) -> pd.DataFrame:
    frames = []
    for tag, value in (("teardown0", "0"), ("default", None)):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
        env.pop("TEARDOWN_CUPTI", None)
        if value is not None:
            env["TEARDOWN_CUPTI"] = value
        args = [sys.executable, str(Path(__file__).resolve()), "--out", str(results / tag),
                "--steps", f"sequence={tag}"] + (["--dry-run"] if dry else [])
        with open(log, "a", encoding="utf-8") as fh:
            subprocess.run(args, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
        path = (results / tag / "results" if dry else Path("/tmp/insight-results")) / \
            f"sequence-{tag}.parquet"
        if path.exists():
            frames.append(pd.read_parquet(path))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def step_settle(s: dict, results: Path, log: Path) -> pd.DataFrame:
    root = results / "settle"
    root.mkdir(parents=True, exist_ok=True)
    frames = []
    for process in range(s["processes"]):
        before = {p.name for p in root.iterdir()}
        run_cli(MATMUL + [s["mm"], s["device"], "seed=[0,1]", "profile=true",
                          f"timer.warmup_s={s['settle']}", f"results_dir={root}"], log)
        sweep = newest_sweep(root, before)
        if sweep is not None and (sweep / "results.parquet").exists():
            frames.append(pd.read_parquet(sweep / "results.parquet").assign(process=process))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def run_cli(args: list[str], log: Path) -> int:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"\n$ python -m runner {' '.join(args)}\n")
        fh.flush()
        return subprocess.run([sys.executable, "-m", "runner", *args], cwd=REPO, env=env,
                              stdout=fh, stderr=subprocess.STDOUT).returncode


def newest_sweep(root: Path, before: set[str]) -> Path | None:
    new = sorted(p for p in root.iterdir() if p.is_dir() and p.name not in before)
    return new[-1] if new else None


def step_probe(s: dict, results: Path, log: Path) -> pd.DataFrame:
    root = results / "probe"
    root.mkdir(parents=True, exist_ok=True)
    frames = []
    for process in range(s["processes"]):
        before = {p.name for p in root.iterdir()}
        start = time.perf_counter()
        rc = run_cli(MATMUL + [s["mm"], *s["matmul_extra"], s["device"], "seed=[0,1]",
                               "profile=true",
                               "energy=true", f"energy_window_s={s['window']}",
                               f"energy_idle_s={s['idle']}", f"results_dir={root}"], log)
        sweep = newest_sweep(root, before)
        print(f"probe process {process}: exit {rc}, {time.perf_counter() - start:.0f} s",
              flush=True)
        if sweep is not None and (sweep / "results.parquet").exists():
            frames.append(pd.read_parquet(sweep / "results.parquet").assign(process=process))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def step_experiment(s: dict, results: Path, log: Path) -> pd.DataFrame:
    root = results / "experiment"
    root.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in root.iterdir()}
    extra = ["smoke=true", "device=cpu"] if s["device"] == "device=cpu" else []
    run_cli(["-m", "experiment=energy_efficiency",
             f"energy_window_s={s['short']},{s['sustained']}", f"results_dir={root}", *extra],
            log)
    sweep = newest_sweep(root, before)
    if sweep is None or not (sweep / "results.parquet").exists():
        return pd.DataFrame()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open(log, "a", encoding="utf-8") as fh:
        subprocess.run([sys.executable, "-m", "runner.report", str(sweep), "--format",
                        "markdown"], cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
    df = pd.read_parquet(sweep / "results.parquet")
    df["window"] = ["short" if job == 0 else "sustained" for job in df["job_num"]]
    return df


def show(df: pd.DataFrame, columns: list[str], title: str) -> None:
    print(f"\n## {title}")
    if df.empty:
        print("(no rows)")
        return
    shown = df[[c for c in columns if c in df.columns]].copy()
    if "top_kernel" in shown:
        shown["top_kernel"] = shown["top_kernel"].astype(str).str.slice(0, 60)
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--steps", default="kernels,probe,experiment")
    parser.add_argument("--processes", type=int, help="probe processes (default 6)")
    parser.add_argument("--matmul-extra", default="", help="overrides for the matmul trials "
                        "of steps kernels and probe, space-separated (timer.warmup_s=1.5)")
    args = parser.parse_args()
    s = sizes(args.dry_run)
    s["matmul_extra"] = args.matmul_extra.split()
    if args.processes:
        s["processes"] = args.processes
    results = Path("/tmp/insight-results") if not args.dry_run else args.out / "results"
    results.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "run.log"
    steps = args.steps.split(",")
    wall = time.perf_counter()
    tables = {}
    if "kernels" in steps:
        tables["kernels"] = step_kernels(s, results)
    if "probe" in steps:
        tables["probe"] = step_probe(s, results, log)
    if "experiment" in steps:
        tables["experiment"] = step_experiment(s, results, log)
    for step in steps:
        if step.startswith("sequence="):  # the inner process of step cupti
            step_sequence(s, results, step.split("=", 1)[1])
            return 0
    if "cupti" in steps:
        tables["cupti"] = step_cupti(results, log, args.dry_run)
    if "settle" in steps:
        tables["settle"] = step_settle(s, results, log)
    with tarfile.open(args.out / "results.tgz", "w:gz") as tar:
        tar.add(results, arcname="insight-results")
    print(f"\ntotal wall {time.perf_counter() - wall:.0f} s")
    if "kernels" in tables:
        df = tables["kernels"]
        show(df, ["case", "rep", "insight", "status", "time_median_us", "ci_rel_halfwidth",
                  "kernel_count", "kernel_time_sum_us", "kernel_span_us", "gpu_idle_fraction",
                  "energy_per_call_mJ", "energy_busy_fraction", "avg_power_W", "top_kernel"],
             "1. kernels and timed medians with the passes off/on (one process)")
        on = df[df["insight"] == "on"]
        for case, group in df.groupby("case"):
            off_med = group.loc[group["insight"] == "off", "time_median_us"]
            on_med = group.loc[group["insight"] == "on", "time_median_us"]
            print(f"{case}: median off {off_med.median():.4g} us, on {on_med.median():.4g} us,"
                  f" on/off {on_med.median() / off_med.median():.4f}")
        for _, row in on.iterrows():
            ksum, span = row.get("kernel_time_sum_us"), row.get("kernel_span_us")
            print(f"{row['case']}: kernel_count {row.get('kernel_count')}, kernel sum "
                  f"{ksum} us, span {span} us, time/op {row['time_per_op_us']:.4g} us: "
                  f"sum <= span {ksum <= span}, sum <= time/op "
                  f"{ksum <= row['time_per_op_us']}, idle {row.get('gpu_idle_fraction')}")
    if "probe" in tables:
        df = tables["probe"]
        show(df, ["process", "seed", "status", "time_median_us", "ci_rel_halfwidth",
                  "sm_clock_mhz_start", "sm_clock_mhz_timed", "sm_clock_mhz_end",
                  "energy_sm_clock_mhz_median", "energy_time_per_call_us",
                  "energy_per_call_mJ", "energy_busy_fraction", "avg_power_W", "idle_power_W",
                  "power_instant_median_W", "energy_counter_steps", "energy_method",
                  "throttle_reasons_end", "top_kernel"],
             "2. bimodality probe: bf16 matmul, one process per block")
        if "energy_per_call_mJ" in df and df["energy_per_call_mJ"].notna().any():
            e = df["energy_per_call_mJ"].dropna()
            print(f"energy_per_call_mJ across {len(e)} trials: min {e.min():.4g}, max "
                  f"{e.max():.4g}, max/min {e.max() / e.min():.4f}")
            first = df[df["seed"] == 0]["energy_per_call_mJ"].dropna()
            print(f"seed-0 trials (first in each process): max/min "
                  f"{first.max() / first.min():.4f}")
    if "experiment" in tables:
        show(tables["experiment"], ["window", "dtype", "status", "time_median_us", "tflops",
                                    "energy_counter_s", "energy_time_per_call_us",
                                    "energy_sm_clock_mhz_median", "avg_power_W",
                                    "idle_power_W", "energy_per_call_mJ", "tflops_per_joule",
                                    "energy_throttle_reasons", "top_kernel"],
             "3. energy_efficiency experiment")
    if "cupti" in tables:
        show(tables["cupti"], ["teardown", "step", "pass", "status", "time_median_us"],
             "4. chain timings before/after a profile and an energy pass (one process each)")
    if "settle" in tables:
        show(tables["settle"], ["process", "seed", "status", "time_median_us",
                                "ci_rel_halfwidth", "warmup_time_s", "sm_clock_mhz_start",
                                "sm_clock_mhz_timed", "power_w_timed", "throttle_reasons_timed",
                                "kernel_span_us", "top_kernel"],
             f"5. bf16 matmul with a settling warm-up (timer.warmup_s={s['settle']})")
        med = tables["settle"]["time_median_us"]
        print(f"settle medians: min {med.min():.4g}, max {med.max():.4g}, "
              f"max/min {med.max() / med.min():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
