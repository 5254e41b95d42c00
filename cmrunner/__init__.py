"""cm: durable, user-owned memory for coding agents.

This package is deliberately empty of imports: every hook and capture process imports it, and
anything re-exported here would be paid for on every host event (python-notes.md §1.7).
"""
