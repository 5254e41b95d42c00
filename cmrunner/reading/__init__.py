"""Reading published memory for a consumer: the authorized documents, secrets withheld, rendered.

Holds ``reader`` (lock-free file reads of the published Markdown and the delimited block a hook
injects) and ``consumer`` (the one read every explicit reader — MCP, ``cm show`` — receives).
It sits above ``cmrunner.secrets`` because every read passes ``secrets.withhold``, and below the
hooks, capture's users, the MCP server and the views that read memory.

May import: the standard library, ``cmrunner.secrets`` and ``cmrunner.core``. The SessionStart
hook runs it, so module import stays cheap (``tests/test_import_boundary.py``).
"""
