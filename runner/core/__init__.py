"""What every layer shares: the axis registry (``axes``: every trial axis, and the mode label
built from it), the one error type for bad input (``errors``), the one resolver of a
dotted path to code (``targets``), the GPUs CUDA would show, counted without torch
(``gpus``), and a trial's outcome (``status``).

Both the run side (``runner.config``, ``runner.execution``) and the read side
(``runner.storage``, ``runner.analysis``, ``runner.claims``) stand on this package, so it sits
below them all.

May import: the standard library only (torch lazily, inside the one function that resolves a
device). Never another runner package.
"""
