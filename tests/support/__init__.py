"""Test support: the project's own fake OpenAI-compatible model server and the real-host helpers.

Nothing here is part of the installed ``cm`` package; tests import it as ``support.*`` (pytest puts
``tests/`` on ``sys.path`` through the rootdir ``conftest.py``).
"""
