"""Result files: the column schema, atomic writes, merging, loading, recovering a sweep.

The storage schema (``columns``) is the contract between the run side and the read side.

May import: pyarrow, pandas, hydra (for the end-of-sweep callback), and the axis registry
(``runner.config.axes``, standard library only) that the axis columns derive from. Never torch.
"""
