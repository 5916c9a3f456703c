"""What the user asked for: the schema Hydra checks, the front door, the trial planner.

The front door (``overrides``): the command line parsed once (``commandline``), each value
checked by the rule declared with its key (axes: ``axes``;
settings: their fields in ``schema``, enforced by ``settings``; op parameters: the builder's
signature, ``ops``), then every job composed and planned (``preflight``). The axis registry
itself is ``runner.core.axes``.

Turns a composed Hydra config into frozen :class:`~runner.config.trials.TrialSpec` objects, or
into a :class:`~runner.core.errors.ConfigError` (exit status 2) before anything runs.

May import: the standard library, omegaconf/hydra, ``runner.core`` (axes, errors, the target
resolver), ``runner.timing.measurement`` (the timer plan), ``runner.claims.spec`` (the typed
`expect:` of an experiment; `expect.py` checks it), and ``runner.storage`` (column names, and
the result files a fixed ``sweep_id`` would clash with).
Never torch at import time (``--help`` and the override checks must stay fast).
"""
