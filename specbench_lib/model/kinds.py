"""The engine kinds a params file may name: ``engine.kind`` and a template's ``engine.api``.

The one engine detail outside ``engines/``: params validates against these names, and the
engines package (which maps each kind to its adapter) re-exports them. This module imports
nothing, so params and the adapters both stand above it.
"""

from __future__ import annotations

KINDS = ("llamacpp", "sglang", "vllm", "template")
APIS = ("llamacpp", "sglang", "vllm")  # the protocols a kind-template server may speak
DEFAULT_KIND = "llamacpp"  # the embedded engine: its binary and model have defaults
# the GPU classes the time model has speeds for (sweep/timemodel.py), and "cpu"
GPU_CLASSES = ("cpu", "A100", "H100", "H200", "B200")
