"""What a sweep is and what it stored: params and their sections, the plan, the verdict catalogue,
cell and request records, fingerprints.
"""
