"""The cell rules, one module each: a :class:`~specbench_lib.analysis.rule.Rule` subclass with
its code, level, what it protects against, its thresholds and its judge. The registry
(:mod:`~specbench_lib.analysis.ruleset`) finds every module here; nothing else lists them.
"""
