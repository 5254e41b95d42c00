"""The heavy side (installed as ``cmrunner.writer_proc``): the drain loop, and later the Memory
Agent runtime, the decision contract, commit and recovery.

Only separate processes (``cm session-drain``, ``cm flush``) import this package; the hook,
capture and read paths never do (``tests/test_import_boundary.py``).
"""
