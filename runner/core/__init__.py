"""What every layer shares: the axis registry and the one error type for bad input.

Both the run side (``runner.config``, ``runner.execution``) and the read side
(``runner.storage``, ``runner.analysis``, ``runner.claims``) stand on this package, so it sits
below them all.

May import: the standard library only (torch lazily, inside the one function that resolves a
device). Never another runner package.
"""
