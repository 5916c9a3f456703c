"""What a command pays after its last line: the driver's exit with workers that hold a GPU.

    python benchmarks/exit_check.py --out OUT_DIR [--runs 3] [--dry]

One quick trial (bf16 1024³ matmul, ``timer=quick``) per command, with one worker on GPU 0
and, where the machine has several GPUs, with a worker per GPU. Each command runs twice per
round, alternating: as opsweep exits (its workers killed, not waited for:
``runner.execution.worker._forget``) and as it exited before (killed, then waited for until
their GPU contexts were torn down). Printed per command: the seconds from its last line of
output to its exit, and its wall (no measure of the exit: the one trial's settling can take
0.1 s in one command and 2.7 s in the next). Logs under ``--out``; the table last.

``--dry`` (CPU dry run): ``device=cpu``, two workers; checks the plumbing, not a number.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from workers_check import gpu_count  # noqa: E402  (one way to count the GPUs)

#: The driver as it exited before: every worker killed, then waited for (every
#: ``Supervisor.stop``, the pool's included, made to wait).
WAITING = """
import runpy, sys
from runner.execution import worker
stop = worker.Supervisor.stop
worker.Supervisor.stop = lambda self, wait=True: stop(self, True)
sys.argv = ["runner", *sys.argv[1:]]
runpy.run_module("runner", run_name="__main__", alter_sys=True)
"""


def timed_command(args: list[str], waits: bool, log: Path) -> tuple[float, float]:
    """The command's wall and the seconds from its last line of output to its exit."""
    driver = ["-c", WAITING] if waits else ["-m", "runner"]
    started = time.perf_counter()
    last_line_at = started
    with open(log, "w") as sink:
        process = subprocess.Popen([sys.executable, *driver, *args], cwd=ROOT, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for line in process.stdout:  # type: ignore[union-attr]
            last_line_at = time.perf_counter()
            sink.write(line)
        process.wait()
    ended = time.perf_counter()
    if process.returncode != 0:
        raise SystemExit(f"{log.name}: exit {process.returncode}; see {log}")
    return ended - started, ended - last_line_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dry", action="store_true")
    opts = parser.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    common = ["op=matmul", "dtype=bf16", "shape=[[1024,1024,1024]]", "timer=quick",
              f"results_dir={opts.out / 'runs'}"]
    gpus = 0 if opts.dry else gpu_count()
    placements = {"1 worker": ["device=cuda:0", "workers=1"]}
    if opts.dry:
        common = ["op=vector_add", "shape=[[64]]", "timer=smoke", common[-1]]
        placements = {"1 worker (CPU)": ["device=cpu", "workers=1"],
                      "2 workers (CPU)": ["device=cpu", "workers=2"]}
    elif gpus > 1:
        devices = ",".join(f"cuda:{i}" for i in range(gpus))
        placements[f"{gpus} workers"] = [f"device=[{devices}]", "workers=per_gpu"]
    seen: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for run in range(opts.runs):
        for name, placed in placements.items():
            for waits in (True, False):
                log = opts.out / f"{name.split()[0]}w_{'waits' if waits else 'exits'}_{run}.log"
                seen.setdefault((name, waits), []).append(
                    timed_command(common + placed, waits, log))
    print(f"{'command':<22}{'exit':<26}{'wall (median)':>15}{'last line to exit':>40}")
    for (name, waits), times in seen.items():
        walls = [wall for wall, _ in times]
        tails = [tail for _, tail in times]
        how = "waits for its workers" if waits else "kills, does not wait"
        print(f"{name:<22}{how:<26}{statistics.median(walls):>13.2f} s"
              f"{statistics.median(tails):>16.2f} s ({', '.join(f'{t:.2f}' for t in tails)})")


if __name__ == "__main__":
    main()
