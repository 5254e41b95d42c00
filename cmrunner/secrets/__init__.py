"""The secret detector: what counts as a secret or personal data, and what cm does with one.

Public face (the only modules other rooms import; ``pyproject.toml``'s private-modules contract
keeps the rest inside):
- ``safety`` — the scanner: ``scan_text`` / ``scan_value`` / ``require_clean``
  (``SENSITIVE_CONTENT_REJECTED``), ``fingerprint``, ``configure`` (deep scan on or off, the
  home's allow-list) and ``deep_scanner_version``. Used before anything is queued, sent or committed.
- ``withhold`` — the read side: a section holding a finding leaves cm as a placeholder;
  ``refresh`` fills the findings cache that ``cm secrets list`` and the hook path read.
- ``allowlist`` — the user's list of fingerprints that are not secrets (``cm secrets allow``).

Inside (underscore modules, for this room and its tests only): ``_rules`` (provider formats,
high-entropy tokens, passwords in prose), ``_forms`` (secrets that are not one token: command-line
passwords, login pairs, key settings, connection strings, PEM bodies, spaced tokens), ``_textnorm`` (the folded and markup-insensitive views
the rules read), ``_deepscan`` (detect-secrets, the maintained detector, deep scans only) and
``_cache`` (the findings cache, keyed by a document's sha256).

Sits just above ``cmrunner.core`` and below every room that reads or writes memory text: capture
and the hooks use it on the hook path, so it may import the standard library and
``cmrunner.core`` only (``_deepscan`` also detect-secrets, imported lazily and never on a hook
or capture path: ``tests/test_import_boundary.py``). Module import stays cheap; ``safety`` and
its rules load only when something is scanned, never on a findings-cache hit.
"""
