"""opsweep's runner: ``python -m runner`` runs sweeps; ``runner.load(path)`` reads their results.

The packages, run side first (each package's docstring says what it may import):

* :mod:`runner.config`    – the axis registry, the schema Hydra checks, override checks, planner;
* :mod:`runner.execution` – one job, one trial, the execution modes, the environment record;
* :mod:`runner.timing`    – the one timer and the statistics of its raw samples;
* :mod:`runner.storage`   – the result columns (the contract), writing, loading, collecting;
* :mod:`runner.analysis`  – compare, roofline, plots, report (no torch);
* :mod:`runner.claims`    – what experiments expect, judged against results (no torch).

The modules beside this file (``compare``, ``report``, ``collect``, ...) are the commands.

``runner.load`` is imported on first use (PEP 562), so ``python -m runner --help`` does not pay
for pandas, and importing this package never imports torch.
"""

from typing import Any

from runner.core.install import alias_ops

__all__ = ["load"]

alias_ops()  # `ops.<module>` (configs' `_target_`s) finds the ops an installed wheel carries


def __getattr__(name: str) -> Any:
    if name == "load":
        from runner.storage.load import load

        return load
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
