"""What experiments claim, judged against their results, and the experiments report.

* ``spec``: the typed ``expect:`` (claims) and ``pivots:`` (tables) of an experiment YAML, and
  their checks; ``runner.config.schema`` makes them fields of the run config.
* ``engine``: one engine judges every claim: select rows, reduce, compare, say why.
* ``bespoke``: the few claims no selector can state, named by ``_target_``.
* ``results``: result files as experiments, with the claims each ran with.
* ``check``: ``check=true`` and ``python -m runner.check`` (exit 1 when a claim failed).
* ``report`` and ``tables``: ``python -m runner.claims.report`` → ``docs/experiments.md``.

May import: pandas, omegaconf, ``runner.analysis``, ``runner.core``, the shared
``runner.cli``/``runner.console``, and, from the run side, only the storage schema and readers
(``runner.storage``). Never torch, ``runner.config`` or ``runner.execution``.
"""
