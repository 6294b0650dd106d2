"""Data for every concept, one module each: apps and plots draw what these functions return.

Each submodule holds pure functions returning dataclasses of numpy arrays and plain values.
"""
