"""Test doubles shared by the runner's tests.

* :class:`ManualClock` is a wall clock a test moves by hand.
* :class:`FakeClock` drives ``runner.timing.timer.measure`` deterministically: every timed region
  (``start`` → ``stop``) takes a scripted duration, and :meth:`FakeClock.wall` is a wall clock
  that advances by exactly the durations consumed, so warm-up by time and ``max_time_s`` can
  be tested to the call.
* Small user functions for ``op=custom op.target=fakes:<name>`` that break a dynamo graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


class ManualClock:
    """A wall clock (seconds) that stands still until the test moves ``now``."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeClock:
    """A ``runner.timing.timer.Clock`` that returns scripted durations and records what happened.

    Each timed region takes the next value of ``durations`` (seconds). Once the script is
    used up, a region takes ``per_call_s`` times the number of :meth:`op` calls made inside it
    (so batching can be tested), or the test fails if ``per_call_s`` is None.

    ``events`` is the ordered log of ``start``, ``stop`` and every name recorded through
    :meth:`op` or :meth:`hook`: tests read it to check that hooks never run inside a timed
    region.
    """

    def __init__(self, durations: Iterable[float] = (), *, per_call_s: float | None = None,
                 events: list[str] | None = None) -> None:
        self._script = list(durations)
        self.per_call_s = per_call_s
        self.events: list[str] = [] if events is None else events
        self.now = 0.0
        self.regions = 0
        self._open: int | None = None
        self._calls_in_region = 0
        self.calls_per_region: list[int] = []

    # -- Clock protocol --------------------------------------------------------------------
    def start(self) -> int:
        assert self._open is None, "start() called while a timed region is open"
        self.regions += 1
        self._open = self.regions
        self._calls_in_region = 0
        self.events.append("start")
        return self._open

    def stop(self, token: int) -> float:
        assert token == self._open, f"stop({token!r}) does not match start() -> {self._open!r}"
        self._open = None
        if self._script:
            duration = self._script.pop(0)
        elif self.per_call_s is not None:
            duration = self.per_call_s * self._calls_in_region
        else:
            raise AssertionError(f"FakeClock script exhausted at region {self.regions}")
        self.now += duration
        self.calls_per_region.append(self._calls_in_region)
        self.events.append("stop")
        return duration

    # -- helpers ---------------------------------------------------------------------------
    def wall(self) -> float:
        """Wall clock for ``measure(wall=...)``: the sum of all durations consumed so far."""
        return self.now

    def advance(self, seconds: float) -> None:
        """Let wall time pass outside any timed region."""
        self.now += seconds

    @property
    def in_region(self) -> bool:
        return self._open is not None

    def op(self, result: Any = None) -> Callable[[], Any]:
        """The function to time: logs ``call`` and counts calls in the open region."""
        def call() -> Any:
            self.events.append("call")
            if self._open is not None:
                self._calls_in_region += 1
            return result
        return call

    def hook(self, name: str) -> Callable[[], None]:
        """A ``before_sample``/``flush`` hook that logs ``name`` and fails inside a region."""
        def hook() -> None:
            assert self._open is None, f"{name} ran inside the timed region"
            self.events.append(name)
        return hook


# ---------------------------------------------------------------------------------------
# Custom ops that break a dynamo graph (op=custom op.target=fakes:<name>).
# ---------------------------------------------------------------------------------------

def explicit_graph_break(x: Any, y: Any) -> Any:
    """``x * y + 1`` with an explicit dynamo graph break in the middle."""
    import torch

    z = x * y
    torch._dynamo.graph_break()
    return z + 1


def data_dependent_branch(x: Any, y: Any) -> Any:
    """A Python ``if`` on a tensor's value (``.item()``): dynamo cannot trace it whole."""
    if x.sum().item() > 0:
        return x * y
    return x - y


# ---------------------------------------------------------------------------------------
# Custom ops that cannot be captured in a CUDA graph (they synchronise with the host).
# ---------------------------------------------------------------------------------------

def reads_a_scalar(x: Any, y: Any) -> Any:
    """``x * sum(y)`` through ``.item()``: a device-to-host read, illegal during capture."""
    return x * y.sum().item()


def synchronizes(x: Any, y: Any) -> Any:
    """``x * y`` followed by ``torch.cuda.synchronize()``, illegal during capture."""
    import torch

    out = x * y
    torch.cuda.synchronize()
    return out
