"""Result files: the column schema, atomic writes, merging, loading.

The storage schema (``columns``) is the contract between the run side and the read side.

``layout`` names the files (standard library only), ``columns`` declares every column,
``files`` writes and merges atomically, ``journal`` keeps each finished trial and builds the
job and sweep files from it, ``load`` reads them (``runner.load``).

May import: pyarrow, pandas, and ``runner.core`` (the axis registry the axis columns derive
from). Never torch, nothing else of runner.
"""
