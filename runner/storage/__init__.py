"""Result files: the column schema, atomic writes, merging, loading.

The storage schema (``columns``) is the contract between the run side and the read side.

May import: pyarrow, pandas, and the axis registry
(``runner.core.axes``, standard library only) that the axis columns derive from. Never torch.
"""
