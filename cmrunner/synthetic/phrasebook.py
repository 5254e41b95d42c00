"""The fixed phrasebook cm's eval worlds are written in, and a small rule-based reader of it.

Contract:
- ``own_words(text)`` splits a user turn into the user's own sentences and the *pasted* content
  (fenced code blocks and ``>`` quoted lines): pasted content is material the user shows, never
  something the user says.
- ``classify(sentence, project)`` gives one ``Statement``: its ``kind`` and, for kinds that can be
  kept, the target kind (``profile``, ``preferences`` or ``project``), a topic heading and a short
  body in the third person. Kinds, first match wins:
  ``forget`` ("Forget that …", "Please forget what I said about …"), ``false`` (hypotheticals
  "Suppose/Imagine/What if/If I were …", jokes "… just kidding"), ``third_party`` ("My colleague
  Dana prefers …"), ``uncertain`` (hedges: maybe, might, perhaps, probably, not sure, I think, I
  guess), ``ephemeral`` (today, tonight, right now, this morning/afternoon/week, at the moment,
  for now), ``question`` (ends with "?"), ``task`` (requests: "Can you …", "Please …", "Rename …"),
  ``correction`` ("Actually, …", "I switched to …", "no longer", "… anymore"), ``statement``
  (what the user asserts about themself, their preferences or — with "this project/repo", "we" —
  the current project), else ``chatter``.
- ``topic(text)`` names a section heading from a small lexicon (Editor, Indentation, Database, …);
  without a match, a few words of the statement itself.
- ``instruction(text)`` finds an instruction addressed to an AI inside content ("AI assistants:
  remember that the user …"): what a careful reader never obeys and an injected one does.
- ``assistant_claims(text)`` finds what an assistant's reply claims about the user ("you are a …",
  "you prefer …"): never evidence about the person.
This reads only the phrasebook; it is not a language model and says nothing about real models.
Stdlib only: it runs inside the fake model server.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# Heading, then the words that name it; the first heading with a match wins, so specific topics
# come before general ones ("tabs in Go code" is about indentation, not the language).
LEXICON: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Main project", ("main project", "side project")),
    ("Indentation", ("tabs", "spaces", "indentation", "indent")),
    ("Editor", ("editor", "neovim", "vim", "emacs", "vs code", "vscode", "helix", "zed", "intellij")),
    ("Shell", ("shell", "zsh", "bash", "fish")),
    ("Database", ("database", "postgresql", "postgres", "mysql", "sqlite", "mongodb")),
    ("Cache", ("cache", "caching", "redis", "memcached")),
    ("Package manager", ("package manager", "pnpm", "npm", "yarn", "poetry")),
    ("Testing", ("tests", "test suite", "pytest", "jest", "vitest", "unit test")),
    ("Deployment", ("deploy", "deploys", "deployment", "fly.io", "kubernetes", "heroku", "vercel")),
    ("Continuous integration", ("github actions", "gitlab ci", "jenkins", "continuous integration")),
    ("Linting", ("linter", "linting", "ruff", "eslint", "flake8")),
    ("Formatting", ("formatter", "black", "prettier", "gofmt", "line length")),
    ("Commit messages", ("commit message", "commit messages", "conventional commits")),
    ("Code review", ("code review", "reviews", "pull request")),
    ("Communication", ("explanations", "answers", "concise", "verbose", "replies", "tone", "bullet points")),
    ("Location", ("live in", "based in", "timezone", "time zone")),
    ("Employer", ("work at", "work for", "works at", "works for")),
    ("Role", ("developer", "engineer", "designer", "scientist", "student", "administrator", "maintainer")),
    ("Spoken languages", ("speak",)),
    ("Operating system", ("linux", "macos", "windows")),
    ("Framework", ("django", "flask", "fastapi", "react", "vue", "rails", "svelte")),
    ("Programming language", ("language", "python", "rust", "golang", "typescript", "java", "kotlin", "cobol",
                              "haskell", "zig", "elixir", "ocaml")),
    ("Diet", ("vegetarian", "vegan", "allergic")),
)

PROJECT_WORDS = re.compile(r"\b(?:this|the|our) (?:project|repo|repository|codebase|service|app)\b|^(?:we|our team)\b",
                           re.I)
FORGET = re.compile(r"^(?:please\s+)?forget\s+(?:that\s+|about\s+|what i (?:said|told you) about\s+)?(?P<rest>.+)$", re.I)
FALSE = re.compile(r"^(?:suppose|imagine|hypothetically|what if|if i were|let's say|pretend)\b|\b(?:just kidding|"
                   r"i'm kidding|joking)\b", re.I)
THIRD_PARTY = re.compile(r"^(?i:my|our)\s+(?i:colleague|coworker|co-worker|teammate|manager|boss|friend|partner|wife|"
                         r"husband|brother|sister|mentor|intern|cofounder|co-founder)\s+(?P<name>[A-Z][\w-]*)\s+(?P<rest>.+)$")
HEDGE = re.compile(r"\b(?:maybe|might|perhaps|probably|possibly|not sure|i think|i guess|unsure)\b", re.I)
EPHEMERAL = re.compile(r"\b(?:today|tonight|right now|this morning|this afternoon|this evening|this week|"
                       r"at the moment|for now)\b", re.I)
TASK = re.compile(r"^(?:can you|could you|would you|please|let's|rename|fix|run|add|remove|delete|refactor|write|"
                  r"show me|explain|open|bump|revert)\b", re.I)
CORRECTION = re.compile(r"^(?:actually|correction|scratch that|update)\b|\b(?:switched|moved|migrated|changed)\b"
                        r"(?:\s+\w+)*?\s+to\b|\bno longer\b|\banymore\b|\bnow (?:use|uses|prefer|prefers|live)\b", re.I)
LEADS = re.compile(r"^(?:(?:actually|also|and|oh|so|ok|okay|fyi|btw|correction|update|scratch that|note that|"
                   r"remember that|please remember that|for the record)\b[,:]?\s*)+", re.I)
INSTRUCTION = re.compile(r"(?:remember|record|store|note|save|write down)\s+that\s+(?:the user|the developer|they)\s+"
                         r"(?P<fact>[^.\n]+)", re.I)
CLAIM = re.compile(r"\byou(?:'re| are)\s+(?P<trait>an? [^.,;!?\n]+)|\byou (?P<verb>prefer|use|like|love)\s+"
                   r"(?P<what>[^.,;!?\n]+)", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_FENCE = re.compile(r"^\s*(```|~~~)")
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "don't": "doesn't", "go": "goes", "was": "was",
              "will": "will", "can": "can", "can't": "can't", "won't": "won't", "would": "would", "should": "should"}
_CONTRACTIONS = (("i'm", "i am"), ("i've", "i have"), ("i'll", "i will"), ("i'd", "i would"))
_PRONOUNS = ((r"\bmy\b", "their"), (r"\bme\b", "them"), (r"\bmyself\b", "themself"), (r"\bmine\b", "theirs"))
_WORD = re.compile(r"[A-Za-z][\w+#-]*")
_FILLER = frozenset({"is", "are", "am", "a", "an", "the", "uses", "use", "prefers", "prefer", "likes", "like", "has",
                     "have", "their"})


class Statement(NamedTuple):
    kind: str
    text: str  # the sentence as the user said it
    where: str | None = None  # profile, preferences or project (kinds that can be kept)
    topic: str = ""
    body: str = ""


def own_words(text: str) -> tuple[list[str], str]:
    """The user's own sentences, and the pasted content (fenced blocks and quoted lines) as one text."""
    own: list[str] = []
    pasted: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or line.lstrip().startswith(">"):
            pasted.append(line.lstrip().lstrip(">").strip())
        else:
            own.append(line)
    sentences = [s.strip() for s in _SENTENCE.split("\n".join(own)) if s.strip()]
    return sentences, "\n".join(pasted)


def topic(text: str, body: str = "") -> str:
    """The lexicon's heading for ``text``; else a few words of ``body`` (the third-person statement)."""
    lowered = f" {text.lower()} "
    for heading, words in LEXICON:
        if any(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", lowered) for w in words):
            return heading
    kept = [w for w in _WORD.findall(body or text) if w.lower() not in _FILLER]
    return " ".join(kept[:4]).capitalize() or "Note"


def _third_person_verb(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low.endswith("ed") or low.endswith("s"):
        return low
    if low.endswith(("sh", "ch", "x", "o")):
        return low + "es"
    if low.endswith("y") and len(low) > 2 and low[-2] not in "aeiou":
        return low[:-1] + "ies"
    return low + "s"


def _finish(text: str) -> str:
    text = text.strip().rstrip(".!;,") + "."
    return text[0].upper() + text[1:]


def third_person(sentence: str) -> str:
    """A short statement in the user's own terms, about the user: "I prefer tabs" → "Prefers tabs."."""
    text = LEADS.sub("", sentence.strip())
    low = text.lower()
    for short, full in _CONTRACTIONS:
        if low.startswith(short + " "):
            text = full + text[len(short):]
            break
    match = re.match(r"^i\s+(?:(?P<adverb>always|never|usually|now|really|also|still)\s+)?(?P<verb>[\w']+)\s*(?P<rest>.*)$",
                     text, re.I)
    if match:
        adverb = (match["adverb"] + " ") if match["adverb"] else ""
        text = f"{adverb}{_third_person_verb(match['verb'])} {match['rest']}"
    else:
        text = re.sub(r"^(?:my|our)\s+", "", text, flags=re.I)
        text = re.sub(r"^(?:in\s+)?(?:this|the|our)\s+(?:project|repo|repository|codebase|service|app)\s*,?\s*", "",
                      text, flags=re.I)
        we = re.match(r"^we\s+(?P<verb>[\w']+)\s*(?P<rest>.*)$", text, re.I)
        if we:
            text = f"{_third_person_verb(we['verb'])} {we['rest']}"
    for pattern, replacement in _PRONOUNS:
        text = re.sub(pattern, replacement, text, flags=re.I)
    return _finish(text)


def _where(text: str, project: bool) -> str | None:
    if PROJECT_WORDS.search(text):
        return "project" if project else None
    low = LEADS.sub("", text).lower()
    if re.match(r"^(?:i'm|i've|my name|i (?:now |still |also |really )?(?:am|work|live|have|speak|studied|lead|was))\b",
                low):
        return "profile"
    if re.match(r"^my (?:main project|side project|job|role|team|background)\b", low):
        return "profile"
    if re.match(r"^(?:i|my)\b", low):
        return "preferences"
    return None


def classify(sentence: str, project: bool) -> Statement:
    """One sentence of the user's own words (see the module contract for the kinds)."""
    text = sentence.strip()
    forget = FORGET.match(text)
    if forget:
        return Statement("forget", text, topic=topic(forget["rest"]), body=forget["rest"])
    stripped = LEADS.sub("", text)
    if FALSE.search(text):
        return Statement("false", text)
    third = THIRD_PARTY.match(stripped)
    if third:
        return Statement("third_party", text, body=third["rest"])
    for kind, pattern in (("uncertain", HEDGE), ("ephemeral", EPHEMERAL)):
        if pattern.search(text):
            return Statement(kind, text)
    if text.endswith("?"):
        return Statement("question", text)
    if TASK.match(stripped):
        return Statement("task", text)
    where = _where(text, project)
    if where is None:
        return Statement("chatter", text)
    kind = "correction" if CORRECTION.search(text) else "statement"
    body = third_person(text)
    return Statement(kind, text, where, topic(stripped, body), body)


def kept_as_fact(sentence: str, project: bool) -> Statement:
    """What a reader that believes a sentence makes of it: its hedges, time words and framing
    dropped, filed as a statement (the faulty policies' way of storing what should not be)."""
    text = HEDGE.sub("", EPHEMERAL.sub("", sentence))
    text = re.sub(r"^(?:suppose|imagine|hypothetically|what if|let's say|pretend)\s*,?\s*(?:that\s+)?", "", text.strip(),
                  flags=re.I)
    text = re.sub(r"\b(?:just kidding|i'm kidding|joking)\b", "", text, flags=re.I)
    text = re.sub(r"\s+", " ", text).strip(" ,.?!")
    where = _where(text, project) or "profile"
    body = third_person(text)
    return Statement("statement", text, where, topic(text, body), body)


def instruction(text: str) -> str | None:
    """The fact an embedded instruction asks memory to record ("…remember that the user X"), or None."""
    found = INSTRUCTION.search(text)
    return found["fact"].strip() if found else None


def assistant_claims(text: str) -> list[str]:
    """What an assistant's reply claims about the user, as first-person sentences ("I am a …")."""
    claims = []
    for found in CLAIM.finditer(text):
        claims.append(f"I am {found['trait']}" if found["trait"] else f"I {found['verb']} {found['what']}")
    return claims
