"""The passes a trial may run *after* its timed samples: profile (kernels) and energy.

Both only ever see the callable the timer timed, after the timer has finished, so they cannot
change the timed numbers; with both off nothing here runs (the trial's task has
``insight=None``). One function, :func:`insight_columns`, is the trial's single call; a pass
that fails leaves its columns null with a reason and the trial ``ok``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.config.settings import check_settings
from runner.config.trial_settings import InsightSettings
from runner.config.trials import TrialSpec
from runner.execution import energy, profiling
from runner.execution.timed_call import TimedCall


@dataclass
class InsightOptions(InsightSettings):
    """The job's ``profile``/``energy`` settings (their fields and rules are declared once, in
    :class:`runner.config.schema.InsightSettings`) and where traces go."""

    #: the job's folder (``<sweep>/jobs/<n>``); traces go to ``<job_dir>/traces/``
    job_dir: Path | None = None

    @classmethod
    def from_config(cls, cfg: Any, job_dir: Path | None) -> InsightOptions | None:
        """The options of a job config, or None when both passes are off (zero cost)."""
        if not (cfg.get("profile", False) or cfg.get("energy", False)):
            return None
        values = {f.name: cfg.get(f.name, f.default) for f in dataclasses.fields(InsightSettings)}
        check_settings(values, InsightSettings)  # already checked on the command line
        return cls(**values, job_dir=job_dir)


def insight_columns(options: InsightOptions, call: TimedCall,
                    spec: TrialSpec) -> dict[str, Any]:
    """Run the enabled passes on the timed call ``call`` of the trial ``spec`` (its device;
    its label and id name the profile's trace file); their columns.

    The GPU's state right after the timed samples (``*_timed``) is read by the trial itself,
    before these passes run (``runner.execution.measured.clock_columns``)."""
    out: dict[str, Any] = {}
    device = spec.device
    if options.profile:
        trace_file, trace_name = _trace_file(options.job_dir, spec.label(), spec.trial_id)
        try:
            out.update(profiling.profile_columns(call.fn, device, options.profile_calls,
                                                 trace_file, before_call=call.before_call,
                                                 trace_name=trace_name,
                                                 period_us=call.per_call_s * 1e6))
        except Exception as exc:  # a profiler failure must not fail the measured trial
            out.update(dict.fromkeys(profiling.PROFILE_COLUMNS))
            out["profile_reason"] = f"profiler failed: {type(exc).__name__}: {_line(exc)}"
    if options.energy:
        try:
            out.update(energy.measure_energy(
                call, device, window_s=options.energy_window_s, idle_s=options.energy_idle_s))
        except Exception as exc:
            out.update(energy.unavailable(f"energy window failed: {type(exc).__name__}: "
                                          f"{_line(exc)}"))
    return out


def _trace_file(job_dir: Path | None, label: str, trial_id: str) -> tuple[Path, str]:
    """A new trace file under ``<job_dir>/traces/`` named after the trial (never reused), and
    its path relative to the sweep folder (what ``trace_path`` records)."""
    import tempfile

    folder = (job_dir or Path(tempfile.gettempdir()) / "opsweep-traces") / "traces"
    stem = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)[:80].strip("_") + f"-{trial_id[:10]}"
    path = folder / f"{stem}.pt.trace.json"
    n = 1
    while path.exists():
        path = folder / f"{stem}-{n}.pt.trace.json"
        n += 1
    name = str(path.relative_to(job_dir.parent.parent)) if job_dir is not None else str(path)
    return path, name


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
