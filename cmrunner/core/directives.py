"""Is a line of memory text an instruction to an agent ("Always run the tests") rather than a fact
about the person ("Runs the tests before every commit")? A deterministic, stdlib-only reader.

Contract:
- ``lines(text, known)`` returns the 0-based indexes of the lines of ``text`` that read as an
  instruction to an agent; ``find`` the first of them, or ``None``. Lines inside fenced code are not judged (code is data),
  nor lines whose normalised form is in ``known`` (text already in the document is not the
  writer's doing), nor ``**Why:**`` lines. ``normal(line)`` is that normalised form
  (``known_lines(document)`` builds the set).
- A sentence is an instruction when, after list markers, emphasis and a leading label such as
  ``IMPORTANT:`` are dropped, it
  * addresses an agent: ``You must/should/are …``, ``Your job is …``, ``The agent/Claude/Copilot
    … must/should/never …``, ``It is important that you …``, ``How to apply:`` (auto memory);
  * opens with a directive phrase: ``Please``, ``Do not``/``Don't``, ``Make sure``, ``Feel free
    to``, ``Let me``, ``Default to``, ``When in doubt``;
  * opens, possibly after ``Always``/``Never`` or a leading clause ending in a comma (``When
    writing Python, …``, ``Before you commit, …``), with a verb in its bare form from ``VERBS``
    (``Run``, ``Use``, ``Prefer``, ``Be`` …); a verb that is as often a noun (``Test``, ``Build``,
    ``Lead``, ``Print``, ``Push`` …, ``NOUN_VERBS``) counts only before an object word (``the``,
    ``your``, ``me``, ``only``, ``up``, a code span …). A word followed by ``:`` or by
    ``is``/``are``/``was``/``has`` is a label or a noun, never a verb, and so is the first word of
    a known noun phrase (``Use case``).
- What is never an instruction: a sentence about the person in the first or third person ("I
  always run the tests", "Prefers small PRs", "The user wants answers in German", "Used to live in
  Paris"): the third-person ``-s`` form is not the bare verb.
- Trade-off (measured in docs/benchmarks.md, "Instructions kept out of the Profile"): a false
  alarm stops a fact from reaching memory, so the rules favour precision; terse nominal rules
  ("No emojis in commit messages", "Tabs, not spaces") are not recognised.
Stdlib only; compiled once at import.
"""

from __future__ import annotations

import re

# Bare verbs that open an instruction and seldom open a statement about a person.
VERBS = frozenset([
    "act", "add", "answer", "apologize", "apologise", "ask", "avoid", "be", "bump", "call", "check", "cite",
    "clean", "comment", "commit", "confirm", "create", "cut", "delete", "deploy", "describe", "disable", "document",
    "double-check", "edit", "enable", "ensure", "escape", "explain", "favor", "favour", "fix", "follow",
    "force-push", "format", "generate", "give", "grep", "guess", "hard-code", "ignore", "include", "install",
    "keep", "label", "limit", "link", "lint", "log", "look", "make", "mark", "mention", "merge", "migrate", "mock",
    "modify", "name", "never", "note", "obey", "open", "output", "paste", "pin", "ping", "prefer", "prefix",
    "print", "push", "put", "quote", "read", "rebase", "refactor", "refer", "regenerate", "remember", "remove",
    "rename", "reply", "report", "respond", "restart", "return", "reuse", "revert", "review", "rewrite", "run",
    "sanitize", "sanitise", "search", "set", "show", "sign", "skip", "sort", "split", "squash", "start", "stick",
    "stop", "suggest", "summarize", "summarise", "tag", "tell", "test", "think", "touch", "translate", "treat",
    "try", "update", "use", "validate", "verify", "wait", "wrap", "write"
])
# Verbs that are as often nouns or adjectives at the start of a statement ("Test lead", "Build
# engineer", "Plan: …", "Open to relocation"): they count only before an object word.
NOUN_VERBS = frozenset([
    "address", "build", "call", "clean", "design", "document", "escape", "focus", "format", "lead", "limit", "log",
    "mark", "merge", "name", "open", "output", "plan", "print", "process", "push", "record", "report", "return",
    "review", "search", "set", "sign", "start", "study", "support", "test"
])
OBJECTS = frozenset([
    "the", "a", "an", "all", "every", "each", "any", "it", "them", "this", "that", "these", "those", "your", "my",
    "our", "their", "its", "me", "us", "only", "up"
])
# Noun phrases that open with a verb ("Use case for the side project: …").
NOUN_PHRASES = frozenset({("use", "case"), ("use", "cases")})
NOT_VERB_AFTER = frozenset({"is", "are", "was", "were", "has", "have", "had", "of"})
_AGENT = (r"(?:you|the\s+(?:agent|assistant|model|ai|bot)|agents?|assistants?|claude|codex|gemini|copilot|cursor"
          r"|the\s+llm|llms?|ai)")
_ADDRESS = re.compile(
    r"^(?:" + _AGENT + r"\s+(?:should|must|shall|will|need\s+to|have\s+to|may\s+not|can(?:no|')t|cannot|never|always"
    r"|are(?:\s+not)?\s+(?:to|allowed|expected|required|a|an|the)\b|do\s+not|don't)"
    r"|your\s+(?:job|task|role|goal)\s+is"
    r"|it\s+is\s+(?:important|essential|critical|crucial)\s+(?:that\s+you|to)"
    r"|how\s+to\s+apply\s*:)",
    re.I)
_PHRASE = re.compile(
    r"^(?:please|kindly|do\s+not|don't|dont|make\s+sure|feel\s+free\s+to|let\s+me|default\s+to|when\s+in\s+doubt)\b",
    re.I)
_LABEL = re.compile(r"^(?:important|note|nb|rule|tip|warning|critical|must|required|reminder)\s*:\s*", re.I)
_MARKER = re.compile(r"^(?:[-*+]\s+|\d+[.)]\s+|>\s*|\[[ xX]\]\s+)+")
_CLAUSE = re.compile(r"^(?:when|whenever|if|before|after|once|unless|until|for|in|while|during|on)\b[^,]{1,80},\s*",
                     re.I)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def normal(line: str) -> str:
    """A line as compared with text already in a document: markers, emphasis and spacing dropped."""
    text = _MARKER.sub("", line.strip())
    return re.sub(r"\s+", " ", text.replace("**", "").replace("__", "")).strip().lower()


def known_lines(document: str) -> frozenset[str]:
    """The normalised non-empty lines of a document (see ``find``)."""
    return frozenset(n for n in (normal(line) for line in document.split("\n")) if n)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _verb_opens(text: str, adverb: bool = False) -> bool:
    """Does ``text`` open with a bare verb used as one (see module contract)? After ``Always`` or
    ``Never`` (``adverb``) a word that may be a noun is a verb: "Never log personal data"."""
    head = text.lstrip("*_\"'( ")
    match = _WORD.match(head)
    if match is None:
        return False
    first = match.group(0).lower()
    rest = head[match.end():]
    if rest.startswith(":"):
        return False  # "Name: Ada", "Plan: become staff"
    following = rest.lstrip(" *_")
    words = _words(following)
    after = words[0] if words else ""
    if first in ("always", "never"):
        return _verb_opens(following, adverb=True)
    if first not in VERBS and first not in NOUN_VERBS:
        return False
    if after in NOT_VERB_AFTER or (first, after) in NOUN_PHRASES:
        return False
    if first in NOUN_VERBS and not adverb:
        return after in OBJECTS or following.startswith("`")
    return True


def is_instruction(sentence: str) -> bool:
    """One sentence (see module contract)."""
    text = sentence.strip().replace("**", "").replace("__", "")
    text = _MARKER.sub("", text).strip()
    text = _LABEL.sub("", text)
    if not text or text.lower().startswith("why:"):
        return False
    if _ADDRESS.match(text) or _PHRASE.match(text):
        return True
    if _verb_opens(text):
        return True
    clause = _CLAUSE.match(text)
    return clause is not None and _verb_opens(text[clause.end():])


def lines(text: str, known: frozenset[str] = frozenset()) -> list[int]:
    """The 0-based indexes of the lines of ``text`` holding an instruction to an agent."""
    found: list[int] = []
    fenced = False
    for index, line in enumerate(text.split("\n")):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or not line.strip() or normal(line) in known:
            continue
        if any(is_instruction(s) for s in _SENTENCES.split(_MARKER.sub("", line.strip()))):
            found.append(index)
    return found


def find(text: str, known: frozenset[str] = frozenset()) -> int | None:
    """The index of the first line of ``text`` holding an instruction to an agent, else ``None``."""
    found = lines(text, known)
    return found[0] if found else None
