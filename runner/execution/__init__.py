"""Running sweeps: one Hydra job, one trial, the execution modes, the environment record, and
the end of a sweep (the Hydra callback that merges and summarises; ``collect`` for a sweep that
ended early).

The only package that builds workloads on a device. Every trial is timed through
``runner.timing`` and becomes a row whose columns ``runner.storage`` declares.

May import: anything (torch, ``ops``, every runner package). Nothing imports it but the commands.
"""
