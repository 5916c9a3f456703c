"""Reading results: compare two result sets, the roofline, plots and the HTML report.

May import: pandas, numpy, scipy, matplotlib, ``runner.storage``, ``runner.core``,
``runner.cli`` and ``runner.timing.spread`` (the samples' shape: the same rule the timer
applies, standard library only). Never torch, and nothing else from the run side
(``runner.execution``, ``runner.timing``, ``runner.config``).
"""
