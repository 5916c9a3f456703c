"""opsweep's runner: ``python -m runner`` runs sweeps; ``runner.load(path)`` reads their results.

Importing this package imports no torch, so loading results in a notebook stays fast.
"""

from runner.storage.load import load

__all__ = ["load"]
