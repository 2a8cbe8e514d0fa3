"""The Hypothesis settings every fuzzing test starts from: reproducible (derandomized, no example
database), no deadline (a loaded 2-core machine), and the blob printed on a failure."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

FUZZ = settings(deadline=None, database=None, derandomize=True, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
