"""The one grammar of scopes and Writer targets, and where a target's document lives.

Contract:
- A *project id* is 1-128 characters of ``[A-Za-z0-9_-]``: it becomes a file name, and that
  alphabet can never escape ``projects/``.
- A *scope* is ``global`` or ``project:<id>`` (capture scopes, ``disclosure.allowedScopes``,
  ``writableScopes``, MCP context ids).
- A *target* is ``profile``, ``preferences`` or ``project:<id>``; ``profile`` and ``preferences``
  belong to the ``global`` scope, ``project:<id>`` to itself.
- A target's document is ``profile.md``, ``preferences.md`` or ``projects/<id>.md`` below the
  memory folder (``document_name``).
Every check is a whole-string match: no trailing newline or other slack is accepted.
No imports at all: the hook path and the config reader use it, and ``re`` (with ``enum``) would be
most of what a hook loads beyond a bare interpreter, so the id check is a set test, not a pattern.
"""

from __future__ import annotations

GLOBAL = "global"
PROJECT_PREFIX = "project:"
GLOBAL_TARGETS = ("profile", "preferences")
PROJECT_ID = "[A-Za-z0-9_-]{1,128}"
# The scope grammar as one anchored pattern, for JSON schemas that advertise it (MCP tools).
SCOPE_PATTERN = rf"^(global|project:{PROJECT_ID})$"
PROJECT_ID_MAX = 128
# PROJECT_ID's alphabet; tests hold the set test equal to the pattern.
_PROJECT_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _well_formed_id(text: str) -> bool:
    return 0 < len(text) <= PROJECT_ID_MAX and _PROJECT_ID_CHARS.issuperset(text)


def is_project_id(value: object) -> bool:
    """Whether ``value`` is a well-formed project id."""
    return isinstance(value, str) and _well_formed_id(value)


def project_id(value: object) -> str | None:
    """The id of a well-formed ``project:<id>``; ``None`` for anything else (``global`` included)."""
    if isinstance(value, str) and value.startswith(PROJECT_PREFIX):
        rest = value[len(PROJECT_PREFIX):]
        if _well_formed_id(rest):
            return rest
    return None


def project_scope(pid: str) -> str:
    """The scope (and target) of a project id."""
    return PROJECT_PREFIX + pid


def is_scope(value: object) -> bool:
    """Whether ``value`` is ``global`` or a well-formed ``project:<id>``."""
    return value == GLOBAL or project_id(value) is not None


def is_target(value: object) -> bool:
    """Whether ``value`` is ``profile``, ``preferences`` or a well-formed ``project:<id>``."""
    return value in GLOBAL_TARGETS or project_id(value) is not None


def target_scope(target: str) -> str:
    """The scope a (well-formed) target belongs to: ``global`` or ``project:<id>``."""
    return GLOBAL if target in GLOBAL_TARGETS else target


def document_name(target: str) -> str:
    """A (well-formed) target's document below the memory folder, ``/``-separated."""
    pid = project_id(target)
    return f"projects/{pid}.md" if pid is not None else f"{target}.md"
