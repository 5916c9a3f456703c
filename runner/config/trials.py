"""The frozen trial spec: everything that defines one trial.

:class:`TrialSpec` is made by the planner (:func:`runner.config.planner.plan_job`, which checks
every value and expands a job into specs) and read by the trial (``runner.execution.trial``).
This module imports no Hydra nor OmegaConf: a worker process imports it with the trial code.
The two helpers below read one config value as its choices, the expansion rule's first step.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from runner.core.axes import AXES, EAGER, CompileMode, DType, GraphMode, mode_label


@dataclass(frozen=True)
class TrialSpec:
    """Everything that defines one trial. Frozen: a spec never changes once expanded.

    The axis fields are the registry's (:data:`runner.core.axes.AXES`), in its order, typed
    as each :attr:`~runner.core.axes.Axis.spec_type`; ``tests/test_axes.py`` fails when the
    two drift, so a new axis is its registry entry plus its field here. ``device`` is the
    resolved device (``cpu``, ``cuda:0``) and ``params`` the op parameters as sorted
    ``(name, value)`` pairs, so the spec hashes to the same id on every machine.
    """

    op: str
    target: str
    shape: tuple[int, ...]
    dtype: DType
    device: str
    seed: int
    num_threads: int | None
    streams: int
    graph: GraphMode
    compile: CompileMode
    compile_dynamic: bool | None
    fullgraph: bool
    backward: bool
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def shape_str(self) -> str:
        return "x".join(str(s) for s in self.shape)

    def canonical(self) -> dict[str, Any]:
        """JSON-ready dict of the spec: each axis as its column value (enums as strings)."""
        out: dict[str, Any] = {"op": self.op, "target": self.target}
        for axis in AXES:
            out[axis.name] = axis.column_value(getattr(self, axis.name))
        out["params"] = {k: v for k, v in self.params}
        return out

    @property
    def trial_id(self) -> str:
        """Stable 16-hex-digit id: sha256 of the canonical JSON (never Python's ``hash``,
        which is salted per process)."""
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def label(self) -> str:
        """Short human label for progress bars and tables: op, dtype, shape, params, and the
        mode (:func:`runner.core.axes.mode_label`) unless it is eager."""
        parts = [self.op, self.dtype.value, self.shape_str]
        parts += [f"{k}={v}" for k, v in self.params]
        mode = mode_label({axis.name: getattr(self, axis.name) for axis in AXES})
        return " ".join(parts + ([] if mode == EAGER else [mode]))


def as_choices(value: Any) -> list[Any]:
    """A scalar is one choice; a list is several."""
    return list(value) if isinstance(value, (list, tuple)) else [value]


def shape_choices(value: Any) -> list[tuple[int, ...]]:
    """``[512, 512]`` is one shape; ``[[512, 512], [1024, 1024]]`` is two."""
    items = list(value)
    if items and all(isinstance(item, (list, tuple)) for item in items):
        return [tuple(item) for item in items]
    return [tuple(items)]

