"""Running a sweep: preflight, fingerprints of the plan, one server config's measurement, rounds
under a time budget, placement on Ray, progress.
"""
