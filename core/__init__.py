"""Shared helpers of every layer (installed as ``medlama.core``): typed settings, errors, atomic writes and
locks, provenance and public paths, intervals, model loading and devices, caches, progress and display.

Nothing here imports a layer above it; every other package may import from here.
"""
