"""Reading the measurements: verdict rules, coalescing, metrics, intervals, the confidence set for
the best and the answer.
"""
