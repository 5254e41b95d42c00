"""Memory sync over the user's own git remote (issue 34): ``cm sync init|status|repair|purge-history``
and ``cm sync``, run by hand or started by the drain after it publishes.

What it holds: the git runner (``sync/git.py``: the real ``git`` binary through subprocess, with a
deadline and every URL redacted), the merge by section (``sync/merge.py``), and the runs themselves
(``sync/engine.py``: commit, fetch, merge, publish, push; ``sync/setup.py``: init, repair, purge-history).

It may import ``writer_proc`` (every change to a memory file is published through the Writer's
own commit path: repository lock, CAS of every live file, atomic publish, history and trash through
``core/history.py``), ``secrets`` and ``core``. Nothing on a hook path imports it: hooks never
touch git or the network. Why no git library: none that is maintained fits (pure-Python ones lag
git's protocols, bindings need a native build), and only the real binary applies the user's own
credential helpers, ssh agent and configuration to their remote.
"""
