"""The one timer every trial goes through, and the statistics derived from its raw samples.

May import: the standard library; torch only inside the CUDA clocks (so tests run the timer with
fake clocks and no device).
"""
