"""Reading results: compare two result sets, the roofline, plots and the HTML report.

May import: pandas, numpy, scipy, matplotlib, ``runner.storage``, ``runner.core`` and
``runner.cli``. Never torch, and nothing from the run side (``runner.execution``,
``runner.timing``, ``runner.config``).
"""
