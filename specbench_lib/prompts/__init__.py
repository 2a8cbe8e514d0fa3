"""What is sent: workloads from their corpora, exact token prompts per cell key, and what a server
has answered before.
"""
