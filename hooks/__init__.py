"""Host-facing hook adapters (installed as ``cmrunner.hooks``).

Everything in this package runs under a host's hook timeout: stdlib only, no Writer import, no
model call, no repository lock. ``tests/test_import_boundary.py`` enforces the import set.
"""
