"""Server processes and what they say: launch, attach, health, logs, crash facts, engine files,
ports, and the engine adapters (engines/).
"""
