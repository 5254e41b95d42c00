"""The MCP server (``cm mcp``): one host connection over stdio.

Holds: the server and its tools/resources (``server``), its strict stdio wire (``wire``), the
launch capability and argument rules (``access``), and admission of relay/init submissions
(``items``).

May import: ``cmrunner.core``, ``cmrunner.capture`` and the mcp SDK. The read profile never opens
SQLite. Never click, textual or the Writer.
"""
