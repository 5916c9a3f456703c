"""Reading results: compare two result sets, the roofline, plots and the HTML report.

May import: pandas, numpy, scipy, matplotlib and ``runner.storage``. Never torch, and nothing
from the run side (``runner.execution``, ``runner.timing``).
"""
