"""Fixtures shared by the runner's tests, and the ``gpu`` marker.

* ``@pytest.mark.gpu`` tests are skipped unless ``torch.cuda.is_available()``.
* fixture ``compose`` builds a job config exactly as ``python -m runner`` does (same config
  dir, same schema), without starting Hydra's app.
* fixtures ``plan_trials`` and ``run_one`` take a composed config through
  ``runner.config.planner.plan_job`` and ``runner.execution.trial.run_trial``.
* fixture ``start_cli`` runs ``python -m runner`` (or another module) in a subprocess in a
  given working directory and returns a :class:`Cli`; start several before waiting on any so
  that the end-to-end runs overlap on the machine's cores.
* a test module that defines ``CLI_RUNS`` (``{name: args}`` or ``{name: (args, folder)}``,
  or a function returning one) gets those runs started as soon as collection ends, before
  the first test of the session runs, so they overlap with the in-process tests; the
  module-scoped fixture ``cli_runs`` hands them to the module's tests.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = REPO_ROOT / "conf"
CLI_TIMEOUT_S = 240


# ---------------------------------------------------------------------------------------
# The gpu marker.
# ---------------------------------------------------------------------------------------

def pytest_configure(config: pytest.Config) -> None:
    # Every process the tests start compiles as it would have (runner.core.bytecode): no
    # test writes a bytecode cache outside its own tmp folder.
    os.environ["OPSWEEP_BYTECODE_CACHE"] = "off"
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    config.addinivalue_line("markers", "slow: a second or more (a process, torch.compile, a "
                                       "large frame); `make test-fast` leaves these out")
    config.addinivalue_line("markers", "cli: runs opsweep in a subprocess (set by hand or from "
                                       "the fixtures it uses; `make test-fast` leaves it out)")
    config.addinivalue_line("markers", "fast_sample(every): a catalog of cases; `make "
                                       "test-fast` runs every Nth (the first of each N), "
                                       "the full suite all of them")


#: Fixtures that run ``python -m runner`` (or a sweep) in a subprocess: a test using one is
#: marked ``cli``, so the edit-test loop can leave it out (``-m "not cli"``).
CLI_FIXTURES = frozenset({"cli_runs", "start_cli", "tiny_cpu_sweep", "installed"})


@pytest.hookimpl(tryfirst=True)  # before -m deselects by markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seen: dict[tuple[str, str], int] = {}  # cases of each fast_sample test so far
    for item in items:
        if CLI_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cli)
        sample = item.get_closest_marker("fast_sample")
        if sample is not None and hasattr(item, "callspec"):
            key = (item.parent.nodeid if item.parent else "", item.originalname)
            seen[key] = seen.get(key, -1) + 1
            if seen[key] % sample.kwargs.get("every", sample.args[0] if sample.args else 1):
                item.add_marker(pytest.mark.slow)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch  # only when GPU tests were collected: keeps analysis-only runs fast

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in gpu_items:
        item.add_marker(skip)


# ---------------------------------------------------------------------------------------
# Composing and planning configs in-process.
# ---------------------------------------------------------------------------------------

def _compose(*overrides: str) -> Any:
    """The job config ``python -m runner OVERRIDES`` would run (one job, no multirun)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from runner.config import schema

    schema.register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def _plan_trials(cfg: Any) -> list[tuple[Any, Any]]:
    """``plan_job(cfg)`` as a list of ``(OpPlan, TrialSpec)`` pairs.

    ``plan_job`` returns either ``(OpPlan, [TrialSpec, ...])`` or a list of planned trials
    with ``.op`` and ``.spec`` (since ``cases`` let one job hold several ops); both are
    accepted so these tests follow the runner rather than pin its internal return type.
    """
    from runner.config.planner import plan_job

    out = plan_job(cfg)
    if isinstance(out, tuple) and len(out) == 2 and hasattr(out[0], "builder"):
        plan, specs = out
        return [(plan, spec) for spec in specs]
    return [(trial.op, trial.spec) for trial in out]


def _run_one(*overrides: str, check_accuracy: bool = True) -> dict[str, Any]:
    """Compose, plan and run the single trial the overrides describe; return its row."""
    from runner.execution.task import TrialTask, TrialTimer
    from runner.execution.trial import run_trial

    cfg = _compose(*overrides)
    trials = _plan_trials(cfg)
    assert len(trials) == 1, f"{overrides} expanded into {len(trials)} trials, expected 1"
    _, spec = trials[0]
    return run_trial(TrialTask(0, spec, TrialTimer.from_settings(cfg.timer), check_accuracy))


@pytest.fixture(scope="session")
def compose() -> Any:
    return _compose


@pytest.fixture(scope="session")
def plan_trials() -> Any:
    return _plan_trials


@pytest.fixture(scope="session")
def run_one(frozen_gc: None) -> Any:
    return _run_one


@pytest.fixture(scope="session")
def frozen_gc() -> None:
    """``run_trial`` calls ``gc.collect()`` twice per trial; freezing the objects that exist
    after the imports (torch's are most of them) keeps each collection short. Behaviour is
    unchanged: frozen objects are only never *collected*, and they are all alive anyway."""
    import torch  # noqa: F401

    import runner.execution.trial  # noqa: F401

    gc.collect()
    gc.freeze()


# ---------------------------------------------------------------------------------------
# The command line, in subprocesses.
# ---------------------------------------------------------------------------------------

def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "400"  # rich wraps at the terminal width: keep messages on one line
    env["PYTHONUNBUFFERED"] = "1"
    # several runs share the machine's cores at once: one intra-op thread each keeps them
    # from oversubscribing it (numbers from these runs are never looked at)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no pool of compile workers
    return env


class Cli:
    """A running ``python -m <module> ARGS`` in ``cwd``; :meth:`wait` gives its result."""

    def __init__(self, args: list[str], cwd: Path, module: str = "runner",
                 env: dict[str, str] | None = None, new_session: bool = False) -> None:
        self.args = list(args)
        self.module = module
        self.cwd = Path(cwd)
        self.cwd.mkdir(parents=True, exist_ok=True)
        # files, not pipes: a run that prints a lot never blocks while nobody reads it
        self._stdout = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self._proc = subprocess.Popen([sys.executable, "-m", module, *self.args],
                                      cwd=self.cwd, env={**cli_env(), **(env or {})},
                                      stdout=self._stdout, stderr=self._stderr, text=True,
                                      # its own process group, as a terminal gives a command
                                      start_new_session=new_session)
        self._done = False

    def wait(self) -> Cli:
        if not self._done:
            try:
                self._proc.wait(timeout=CLI_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
                self._collect()
                raise AssertionError(f"{self} did not finish in {CLI_TIMEOUT_S} s\n"
                                     f"{self.stderr[-4000:]}") from None
            self._collect()
        return self

    def _collect(self) -> None:
        self._stdout.seek(0)
        self._stderr.seek(0)
        self.stdout, self.stderr = self._stdout.read(), self._stderr.read()
        self._stdout.close()
        self._stderr.close()
        self.returncode = self._proc.returncode
        self._done = True

    @property
    def output(self) -> str:
        """stdout and stderr, whitespace-normalised (rich may wrap long lines)."""
        self.wait()
        return " ".join((self.stdout + "\n" + self.stderr).split())

    @property
    def err(self) -> str:
        """stderr, whitespace-normalised."""
        self.wait()
        return " ".join(self.stderr.split())

    def stop(self) -> None:
        """Kill the run if it is still going (our own child process, by its handle)."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    def group_signal(self, sig: int) -> None:
        """Signal the run's process group (``new_session``), as a terminal does on Ctrl-C."""
        os.killpg(self._proc.pid, sig)

    def ctrl_c_after_rows(self, sweep: Path, rows: int = 2, wait_s: float = 200) -> Cli:
        """The terminal's Ctrl-C (SIGINT to the run's process group: ``new_session``) once
        the sweep has journaled ``rows`` rows (or the run ended, or ``wait_s`` passed); then
        wait for the run to end."""
        from runner.storage import journal

        deadline = time.monotonic() + wait_s
        while (self.running and time.monotonic() < deadline
               and sum(journal.count_entries(job) for job in sweep.glob("jobs/*")) < rows):
            time.sleep(0.05)
        self.group_signal(signal.SIGINT)
        return self.wait()

    def __repr__(self) -> str:
        return f"python -m {self.module} {' '.join(self.args)} (in {self.cwd})"

    def explain(self) -> str:
        self.wait()
        return (f"{self!r} exited {self.returncode}\n--- stdout\n{self.stdout[-4000:]}\n"
                f"--- stderr\n{self.stderr[-4000:]}")


@pytest.fixture(scope="session")
def start_cli() -> Any:
    """``start_cli(args, cwd, module="runner", env=None, new_session=False) -> Cli``,
    already running."""
    return Cli


# ---------------------------------------------------------------------------------------
# Runs declared by test modules (CLI_RUNS), started right after collection.
# ---------------------------------------------------------------------------------------

_MODULE_RUNS: dict[str, dict[str, Cli]] = {}
_RUN_FOLDERS: list[Path] = []


def _start_module_runs(module: Any) -> dict[str, Cli]:
    declared = module.CLI_RUNS() if callable(module.CLI_RUNS) else module.CLI_RUNS
    base = Path(tempfile.mkdtemp(prefix=f"opsweep-{module.__name__}-"))
    _RUN_FOLDERS.append(base)
    runs = {}
    for name, spec in declared.items():
        args, folder = spec if isinstance(spec, tuple) else (spec, name)
        runs[name] = Cli(list(args), base / folder)
    return runs


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    for item in session.items:
        # only where a selected test reads them: `-m "not cli"` deselects every reader, and
        # runs nobody reads would take the cores from the tests that remain
        if "cli_runs" not in getattr(item, "fixturenames", ()):
            continue
        module = item.getparent(pytest.Module)
        obj = getattr(module, "obj", None)
        if obj is not None and hasattr(obj, "CLI_RUNS") and obj.__name__ not in _MODULE_RUNS:
            _MODULE_RUNS[obj.__name__] = _start_module_runs(obj)


@pytest.fixture(scope="module")
def cli_runs(request: pytest.FixtureRequest) -> dict[str, Cli]:
    """The module's ``CLI_RUNS``, started at collection (or now, if they were not)."""
    name = request.module.__name__
    if name not in _MODULE_RUNS:
        _MODULE_RUNS[name] = _start_module_runs(request.module)
    return _MODULE_RUNS[name]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for runs in _MODULE_RUNS.values():
        for run in runs.values():
            run.stop()
    for folder in _RUN_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)
