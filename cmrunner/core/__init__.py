"""The foundation every other room stands on: what cm *is*, with no opinion about who runs it.

Holds: errors and codes (``errors``); paths of a home and data root (``home``); filesystem safety
(``fsutil``); process identity (``identity``); configuration and the private ``.env``
(``config``, ``envfile``); the SQLite store — connection layer ``db``, ``store``, ``migrations``,
the write ``gate`` — and the tables that belong to no single room (``drainlease``,
``drainfailures``, the job queue ``jobstore``, the commit ``records``); projects and workspaces; the Markdown section model (``sections``); text
rules (``textchars``, ``textnorm``); the one secret detector (``safety`` with ``secret_rules``;
``deepscan`` wraps detect-secrets; ``allowlist``, ``withhold``, ``secretcache``); the lock-free
reader of published memory (``reader``, ``consumer``); and ``reasons``, the plain words for every
code.

May import: the standard library and ``cmrunner.core`` only; ``envfile`` also python-dotenv and
``deepscan`` detect-secrets. Never click, textual, mcp, httpx2, pydantic or any room above. Most
of it runs inside a 3-second hook: keep module import cheap (``tests/test_import_boundary.py``).
"""
