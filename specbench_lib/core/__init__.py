"""Leaves every other folder may use: the error hierarchy, bounded file I/O, shape checks,
durations, paths, and how values render (text, HTML, tables).
"""
