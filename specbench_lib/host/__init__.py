"""The measuring host: its load sampler, the /proc and nvidia-smi readers, CPU pinning and the
stall watch.
"""
