"""What experiments claim, judged against their results, and the experiments report.

May import: pandas, ``runner.analysis`` and ``runner.storage``. Never torch.
"""
