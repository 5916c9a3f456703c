"""Running trials: one Hydra job, one trial, the execution modes, the environment record.

The only package that builds workloads on a device. Every trial is timed through
``runner.timing`` and becomes a row whose columns ``runner.storage`` declares.

May import: torch, ``ops``, ``runner.config``, ``runner.timing``, ``runner.storage``.
"""
