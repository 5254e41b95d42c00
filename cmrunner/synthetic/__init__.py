"""A synthetic, clearly labelled stand-in for a model provider (loopback only, bounded lifetime).

``cm demo``, ``cm eval --synthetic`` and the test suite run the whole loop against it: it speaks the
two streaming wire protocols (``fakemodel.py``, ``fakewire.py``), drives cm's real Memory Agent tools
like a diligent model with a policy (``fakepolicy.py``; the careful reader of the eval phrasebook in
``careful.py`` and ``phrasebook.py``, one faulty variant per violation class in ``faulty.py``), and
injects failures on cue. ``codexplay.py`` plays Codex sessions through the real ``cm hook codex``.
It is never used unless a command or test starts it explicitly, and it never leaves 127.0.0.1.

May import: core, and otherwise only the standard library (the server runs as ``python -I``).
"""
