"""``cm eval``: memory quality you can measure — synthetic worlds, run through cm's real path.

A world is a short scripted history (sessions of user turns across projects, imports) and the
checks its resulting Markdown must pass. This room loads and validates worlds (``world.py``,
``tomllines.py``), resolves the model under test and the optional judge (``models.py``), runs
each world in a fresh temporary home through the real hooks, drain and Writer (``runner.py``),
evaluates the checks (``checks.py``, ``judge.py``), reads each world's cost from its disclosure
ledger (``cost.py``) and builds the report (``report.py``). It never prints, never imports click,
and never touches the user's own home or memory beyond reading its configuration and key.

May import: manage, views, mcpserver, writer_proc, capture, synthetic, core (and pydantic).
Imported by: commands (the ``cm eval`` front end).
"""
