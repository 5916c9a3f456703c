"""Which copies cross the host-device link instead of staying in device memory.

``op=copy`` with ``direction=h2d`` or ``d2h`` moves its bytes over PCIe (or NVLink-C2C), a
link an order of magnitude slower than the GPU's memory, so two parts of opsweep treat such a
trial apart, and both read this one declaration: the roofline holds it against the link's
bandwidth, not the memory's (``runner.analysis.roofline``), and the timer does not time it on
several allocations of its inputs (``runner.execution.allocations``): its bytes never sit in
the GPU's L2 between calls, so where the device side of them lives cannot move its time.

Standard library only: the read side uses it without torch.
"""

from __future__ import annotations

from typing import Any

#: ``param_direction`` values (``op.direction``) whose bytes cross the host-device link.
HOST_LINK_DIRECTIONS = ("h2d", "d2h")


def crosses_host_link(direction: Any) -> bool:
    """Whether a trial's ``direction`` parameter (None for an op without one) names a copy
    over the host-device link."""
    return direction in HOST_LINK_DIRECTIONS
