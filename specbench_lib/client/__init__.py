"""Talking to a server: the HTTP/1.1 wire with kernel timestamps, request dispatch, stream reading
and request limits.
"""
