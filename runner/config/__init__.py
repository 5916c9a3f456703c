"""What the user asked for: the schema Hydra checks, the checks on overrides, the trial planner.

Turns a composed Hydra config into frozen :class:`~runner.config.trials.TrialSpec` objects, or
into a :class:`~runner.core.errors.ConfigError` (exit status 2) before anything runs.

May import: the standard library, omegaconf/hydra, ``runner.core`` (axes, errors, the target
resolver), ``runner.timing.timer`` (timer defaults), ``runner.claims.spec`` (the typed
`expect:` of an experiment; `expect.py` checks it), and ``runner.storage`` (column names, and
the result files a fixed ``sweep_id`` would clash with).
Never torch at import time (``--help`` and the override checks must stay fast).
"""
