"""The op catalog: each module builds a :class:`ops.base.Workload` for one kind of computation.

See ``ops/base.py`` for the contract and ``conf/op/*.yaml`` for each op's defaults.
"""
