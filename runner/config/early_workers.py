"""The workers a command line asks for, read before Hydra is imported.

Why: a worker's ``import torch`` (3-5 s) is most of the time from the command to the first
trial, and the driver's own start (importing Hydra, parsing, composing and planning every
job: 0.5-1 s and more) can run beside it only if the workers start first. So
``runner.__main__`` reads the raw arguments here, without Hydra, and starts the workers
they plainly ask for at once (``runner.execution.pool.prestart``): ``workers=N``,
``workers=per_gpu`` (one per GPU, counted without torch), ``workers=1`` or nothing (the one
default worker), each warming the devices ``device=`` names. Once Hydra has parsed the same
command line (:meth:`WorkerRequest.parsed`), a request equal to the early one starts nothing
more; another one starts what it asks for, and the job stops whatever it does not use
(docs/scale-out.md).

Anything unusual waits for the parse: a flag other than ``-m``, a Hydra key (a launcher runs
its jobs elsewhere), a placing key added or removed (``+device=``, ``~workers``), a value
this module does not read the way Hydra's grammar would, a sweep over a placing key
(``-m workers=1,2``: the jobs differ), and without ``-m`` any value that reads as a sweep
(refused at once; a worker started for it would only take a core from the refusal).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: Override keys (their first part) that place the workers; ``hydra`` may (its launcher).
PLACING_KEYS = ("isolation", "workers", "device", "hydra")
_MULTIRUN = ("-m", "--multirun")
_DEVICE = r"auto|cpu|cuda(?::\d+)?"
_DEVICE_VALUE = re.compile(rf"\s*({_DEVICE})\s*")
_DEVICE_LIST = re.compile(rf"\[\s*(?:{_DEVICE})\s*(?:,\s*(?:{_DEVICE})\s*)*\]")
_SECONDS = re.compile(r"\d+(?:\.\d*)?|\.\d+")


@dataclass(frozen=True)
class WorkerRequest:
    """What starts the workers: ``workers``' one value (``2``, ``"per_gpu"``; None: several,
    unsure), the values given for ``device`` (each a name or a list of names, as Hydra's
    parse gives them; None: not given) and ``gpu_warmup_s`` in seconds (0: not given)."""

    workers: Any
    device: tuple[Any, ...] | None
    heat_s: float = 0.0

    @property
    def arguments(self) -> tuple[Any, list[Any] | None, float]:
        """The arguments of ``runner.execution.pool.prestart``."""
        return self.workers, None if self.device is None else list(self.device), self.heat_s

    @classmethod
    def parsed(cls, cmd: Any) -> WorkerRequest | None:
        """The request of a :class:`~runner.config.commandline.CommandLine` (Hydra's
        parse); None for ``isolation=none`` (the trials run in the driver) and for a
        launcher other than Hydra's basic one."""
        if "none" in (cmd.values_of("isolation") or []):
            return None
        if (cmd.values_of("hydra/launcher") or ["basic"]) != ["basic"]:
            return None  # its jobs run in processes of their own, each starting its workers
        workers = cmd.values_of("workers") or [1]  # unset: one worker
        device = cmd.values_of("device")
        return cls(workers[0] if len(workers) == 1 else None,
                   None if device is None else tuple(_frozen(v) for v in device),
                   seconds(cmd.values_of("gpu_warmup_s")))


def early_request(args: Sequence[str]) -> WorkerRequest | None:
    """The workers ``args`` plainly ask for, read without Hydra (this module's docstring);
    None when only Hydra's parse can tell. Hydra keeps the last of a key given twice; so
    does this."""
    multirun = any(arg in _MULTIRUN for arg in args)
    given: dict[str, str] = {}
    for arg in args:
        if arg in _MULTIRUN:
            continue
        key, equals, value = arg.partition("=")
        if arg.startswith("-") or not equals:
            return None
        if key.lstrip("+~").replace("/", ".").split(".")[0] in PLACING_KEYS:
            if key not in ("isolation", "workers", "device"):
                return None  # hydra's keys, +device=, ~workers, device.x=
            given[key] = value
        elif key == "gpu_warmup_s":
            given[key] = value
        if not multirun and reads_as_sweep(value):
            return None
    if given.get("isolation", "process").strip() != "process":
        return None
    workers = _workers(given.get("workers", "1"))
    device = _device(given["device"]) if "device" in given else None
    if workers is None or ("device" in given and device is None):
        return None
    heat = given.get("gpu_warmup_s", "").strip()
    return WorkerRequest(workers, None if device is None else (device,),
                         seconds([float(heat)] if _SECONDS.fullmatch(heat) else None))


def _workers(value: str) -> Any:
    """``workers``' value as Hydra reads it (an int, or ``per_gpu``); None for any other
    text (a sweep, a quoted value, an interpolation: the parse reads those)."""
    value = value.strip()
    if value.isdigit() and value.isascii():
        return int(value)
    return "per_gpu" if value == "per_gpu" else None


def _device(value: str) -> Any:
    """``device``'s value as Hydra reads it: a device name, or a list of them; None for any
    other text."""
    match = _DEVICE_VALUE.fullmatch(value)
    if match:
        return match.group(1)
    if _DEVICE_LIST.fullmatch(value.strip()):
        return tuple(item.strip() for item in value.strip()[1:-1].split(","))
    return None


def _frozen(value: Any) -> Any:
    """A parsed value comparable with :func:`_device`'s (a list becomes a tuple)."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def seconds(values: list | None) -> float:
    """The one number of seconds given (0.0 for none, several, or one the job will refuse)."""
    try:
        return max(float(values[0]), 0.0) if values and len(values) == 1 else 0.0
    except (TypeError, ValueError):
        return 0.0


def reads_as_sweep(value: str) -> bool:
    """``a,b`` (a comma outside brackets and quotes) or ``range(...)`` and the grammar's other
    sweep functions: what Hydra's grammar would read as a sweep, roughly (a value it reads
    otherwise only starts the workers after the parse)."""
    if re.match(r"\s*(range|choice|glob|interval|shuffle|sort|tag)\(", value):
        return True
    depth, quote = 0, ""
    for char in value:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            return True
    return False
