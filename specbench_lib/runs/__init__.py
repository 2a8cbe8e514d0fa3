"""The run store and its read model: run directories, manifest, lock, attempts, provenance, and RunResult."""
