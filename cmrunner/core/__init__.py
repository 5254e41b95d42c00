"""The foundation every other room stands on: what cm *is*, with no opinion about who runs it.

Holds: errors and codes (``errors``); paths of a home and data root (``home``); filesystem safety
(``fsutil``); process identity (``identity``); configuration and the private ``.env``
(``config``, ``envfile``); the SQLite store — connection layer ``db``, ``store``, ``migrations``,
the write ``gate`` — and the tables that belong to no single room (``drainlease``,
``drainfailures``, the job queue ``jobstore``, the commit ``records``); projects and workspaces;
the Markdown section model (``sections``); the characters memory text may never hold
(``textchars``); and ``reasons``, the plain words for every code. The secret detector has its own
room just above (``cmrunner.secrets``), and so has the reader of published memory
(``cmrunner.reading``), which withholds through it.

May import: the standard library and ``cmrunner.core`` only; ``envfile`` also python-dotenv.
Never click, textual, mcp, httpx2, pydantic or any room above. Most of it runs inside a
3-second hook: keep module import cheap (``tests/test_import_boundary.py``).
"""
