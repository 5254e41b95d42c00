"""An eval world: a short scripted history and the checks on the memory it should leave.

Contract:
- ``World`` is the one typed model of a world file (pydantic, strict, unknown keys refused):
  ``id``, ``title``, the ``classes`` it tests, optional ``context`` (the assistant replies are
  disclosed to the Memory Agent, as ``conversation_context``), optional ``projects`` (``id`` and
  ``name``; each becomes a registered, readable and writable project of the temporary home),
  ``sessions`` in order (each in a project's folder or the global one: a Codex conversation of
  ``turns`` — ``user`` and ``assistant`` — or one ``import``ed Markdown document), and ``checks``.
- Checks (``kind``): ``present``, ``absent``, ``absent_everywhere``, ``not_current``, ``not_global``,
  ``nothing_written``, ``injected``, ``not_injected`` and ``judge``; each names the ``class`` it
  scores. Patterns are case-insensitive regular expressions. ``where`` is ``profile``,
  ``preferences``, ``global`` (both), ``project:<world project id>`` or ``everywhere``.
- Beyond the schema: project references resolve to a declared project, every check's class is
  one of the world's classes and every class has a check.
- ``load(path)`` reads and validates one file: ``WORLD_PARSE_ERROR`` (not TOML; the file and
  tomllib's line) or ``WORLD_INVALID`` (the file, the line of the offending key, what is accepted).
- ``shipped()`` lists the worlds in the package (``worlds/*.toml``), ordered by file name;
  ``json_schema()`` is the schema committed as ``world.schema.json``.
"""

from __future__ import annotations

import os
import re
import tomllib
from importlib import resources
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from cmrunner.core.errors import CmError
from cmrunner.evals import tomllines

VIOLATIONS = ("obsolete_as_current", "false_as_fact", "third_party_as_user", "local_as_global",
              "uncertain_as_verified", "injection_as_instruction", "irrelevant_leakage", "ephemeral_as_trait")
CAPABILITIES = ("remember", "correct", "forget", "isolation")
CLASSES = VIOLATIONS + CAPABILITIES
CHECK_KINDS = ("present", "absent", "absent_everywhere", "not_current", "not_global", "nothing_written", "injected",
               "not_injected", "judge")
Class = Literal["obsolete_as_current", "false_as_fact", "third_party_as_user", "local_as_global",
                "uncertain_as_verified", "injection_as_instruction", "irrelevant_leakage", "ephemeral_as_trait",
                "remember", "correct", "forget", "isolation"]
WHERE_PATTERN = r"^(profile|preferences|global|everywhere|project:[A-Za-z0-9_-]{1,64})$"
ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error:
        raise ValueError("must be a valid regular expression") from None
    return value


Pattern = Annotated[str, Field(min_length=1, max_length=500), AfterValidator(_regex)]
Where = Annotated[str, Field(pattern=WHERE_PATTERN)]
Text = Annotated[str, Field(min_length=1, max_length=20_000)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=False)


class _Check(_Strict):
    class_: Class = Field(alias="class")


class Present(_Check):
    """A section of ``where`` matches ``pattern`` (and its heading ``heading``, when given)."""
    kind: Literal["present"]
    where: Where
    pattern: Pattern
    heading: Pattern | None = None


class Absent(_Check):
    """No section of ``where`` (heading or body) matches ``pattern``."""
    kind: Literal["absent"]
    where: Where
    pattern: Pattern


class AbsentEverywhere(_Check):
    """No document of memory matches ``pattern``."""
    kind: Literal["absent_everywhere"]
    pattern: Pattern


class NotCurrent(_Check):
    """No line of memory states ``pattern`` as current; where the line marks it as past ("switched
    from Vim", "used to live in Lisbon", "Lisbon until May") it is history, not a contradiction."""
    kind: Literal["not_current"]
    pattern: Pattern


class NotGlobal(_Check):
    """Neither profile nor preferences matches ``pattern`` (a project's fact stays in the project)."""
    kind: Literal["not_global"]
    pattern: Pattern


class NothingWritten(_Check):
    """No commit changed any document: every decision was to ignore."""
    kind: Literal["nothing_written"]


class Injected(_Check):
    """A new session in ``project`` (or the global folder) receives memory matching ``pattern``."""
    kind: Literal["injected"]
    project: str | None = None
    pattern: Pattern


class NotInjected(_Check):
    """A new session in ``project`` (or the global folder) receives no memory matching ``pattern``."""
    kind: Literal["not_injected"]
    project: str | None = None
    pattern: Pattern


class Judge(_Check):
    """Asked of a judge model the user names; reported apart, never part of the score."""
    kind: Literal["judge"]
    where: Where
    question: Text


Check = Annotated[Present | Absent | AbsentEverywhere | NotCurrent | NotGlobal | NothingWritten | Injected
                  | NotInjected | Judge, Field(discriminator="kind")]


class Project(_Strict):
    id: Annotated[str, Field(pattern=ID_PATTERN)]
    name: Annotated[str, Field(min_length=1, max_length=100)]


class Turn(_Strict):
    user: Text
    assistant: Text = "Noted."


class Import(_Strict):
    """A Markdown file the user imports with ``cm import`` (into the session's project, if any)."""
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}\.md$")]
    text: Text


class Session(_Strict):
    project: str | None = None
    turns: Annotated[list[Turn], Field(max_length=10)] = []
    import_: Import | None = Field(default=None, alias="import")


class World(_Strict):
    id: Annotated[str, Field(pattern=ID_PATTERN)]
    title: Annotated[str, Field(min_length=1, max_length=200)]
    classes: Annotated[list[Class], Field(min_length=1)]
    context: bool = False
    projects: list[Project] = []
    sessions: Annotated[list[Session], Field(min_length=1, max_length=12)]
    checks: Annotated[list[Check], Field(min_length=1)]

    @property
    def user_turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def _problems(world: World) -> list[tuple[tuple[str | int, ...], str]]:
    """What the schema cannot say: references, and classes matched to checks."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    declared = [p.id for p in world.projects]
    if len(set(declared)) != len(declared):
        found.append((("projects",), "must not declare a project id twice"))
    for i, session in enumerate(world.sessions):
        if session.project is not None and session.project not in declared:
            found.append((("sessions", i, "project"), f"must be a declared project id ({', '.join(declared) or 'none'})"))
        if (not session.turns) == (session.import_ is None):
            found.append((("sessions", i), "must have either turns or an import"))
        if session.import_ is not None and session.project is None:
            found.append((("sessions", i, "import"), "needs the session's project (imports go into a project)"))
    for i, check in enumerate(world.checks):
        where = getattr(check, "where", None)
        project = where[len("project:"):] if isinstance(where, str) and where.startswith("project:") else None
        project = getattr(check, "project", None) or project
        key = "where" if hasattr(check, "where") else "project"
        if project is not None and project not in declared:
            found.append((("checks", i, key), f"must name a declared project id ({', '.join(declared) or 'none'})"))
        if check.class_ not in world.classes:
            found.append((("checks", i, "class"), f"must be one of the world's classes ({', '.join(world.classes)})"))
    scored = {c.class_ for c in world.checks if c.kind != "judge"}
    for i, name in enumerate(world.classes):
        if name not in scored:
            found.append((("classes", i), f"{name} has no deterministic check; add one or remove the class"))
    return found


def _accepted(error: Any) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "extra_forbidden":
        return "is not a known key"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return "must be one of " + ", ".join(CHECK_KINDS)
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}"
    if kind == "missing":
        return "is required"
    if kind == "string_pattern_mismatch":
        return f"must match {ctx.get('pattern')}"
    return str(error["msg"]).replace("Value error, ", "").rstrip(".").lower()


def _dotted(loc: tuple[str | int, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(the world)"


def _invalid(label: str, text: str, loc: tuple[str | int, ...], message: str) -> CmError:
    line = tomllines.line_of(tomllines.key_lines(text), loc)
    return CmError("WORLD_INVALID", f"{label}:{line}: {_dotted(loc)} {message}; see docs/eval.md for the world format")


def parse(text: str, label: str) -> World:
    """A world from TOML text; ``label`` names it in errors (a path or ``package:worlds/x.toml``)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CmError("WORLD_PARSE_ERROR", f"{label}: {exc}; fix the TOML syntax there") from None
    try:
        world = World.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        # pydantic places the union's chosen tag in the location; the file has no such key.
        loc = tuple(p for p in first["loc"] if p not in CHECK_KINDS or first["loc"][:1] != ("checks",))
        if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc, "kind")
        raise _invalid(label, text, loc, _accepted(first)) from None
    problems = _problems(world)
    if problems:
        raise _invalid(label, text, *problems[0])
    return world


def load(path: str) -> World:
    """One world file from the user (``cm eval --world-file``)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        raise CmError("WORLD_NOT_FOUND", f"{path} cannot be read; check the path") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CmError("WORLD_PARSE_ERROR", f"{path}: not UTF-8 text; save the world as UTF-8") from None
    return parse(text, path)


def shipped() -> list[World]:
    """The worlds in the package, ordered by file name."""
    folder = resources.files("cmrunner.evals") / "worlds"
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".toml"))
    return [parse((folder / name).read_text(encoding="utf-8"), f"worlds/{name}") for name in names]


def shipped_paths() -> list[str]:
    folder = str(resources.files("cmrunner.evals") / "worlds")
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".toml"))


def json_schema() -> dict:
    schema = World.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cm eval world"
    return schema


def select(ids: tuple[str, ...] = (), classes: tuple[str, ...] = (), files: tuple[str, ...] = ()) -> list[World]:
    """The suite to run: the shipped worlds named by id or testing one of ``classes``, plus the world
    files; every shipped world when nothing at all is named."""
    unknown = [c for c in classes if c not in CLASSES]
    if unknown:
        raise CmError("UNKNOWN_CLASS", f"no class {unknown[0]!r}; use one of " + ", ".join(CLASSES))
    worlds = shipped()
    known = {w.id for w in worlds}
    missing = [i for i in ids if i not in known]
    if missing:
        raise CmError("UNKNOWN_WORLD", f"no shipped world {missing[0]!r}; `cm eval --list` names them")
    chosen = [w for w in worlds if w.id in ids or set(w.classes) & set(classes)]
    if not (ids or classes or files):
        chosen = worlds
    chosen += [load(path) for path in files]
    seen: set[str] = set()
    for world in chosen:
        if world.id in seen:
            raise CmError("DUPLICATE_WORLD", f"two worlds have the id {world.id!r}; give each world its own id")
        seen.add(world.id)
    return chosen
