"""The metric families, one module each: a :class:`~specbench_lib.analysis.metric.Family` (its
``FAMILY``) with its metrics' declarations beside the computation that gives them. The registry
(:mod:`~specbench_lib.analysis.metricset`) finds every module here; nothing else lists them.
"""
