"""The plan of an import: the parts a text becomes, what they will cost, and whether to ask first.

Contract (any imported text: ``cm import <file.md>`` today, other sources later):
- ``split(text, blocks, limit, reserve)`` cuts a normalised Markdown text into parts at top-level
  block boundaries (``blocks``: headings, paragraphs, lists, quotes, tables, code, from
  markdown-it-py), preferring to start a part at a heading once the current part is three quarters
  full; each part's envelope (its other fields take ``reserve``), read into a request, takes at
  most ``limit`` wire bytes (``cmrunner.agentrt.budget.wire_bytes``). A block larger than half a
  part is cut between its lines; a single line that large is refused before anything is queued: ``SOURCE_TOO_LARGE`` (or ``IMPORT_CHUNK_TOO_LARGE`` when an explicit disclosure cap
  is the smaller limit), saying which line and what to do. Nothing is ever dropped or truncated:
  the parts' texts joined are the text.
- A text that fits one part is one part (``part 1 of 1``), as before parts existed.
- ``Plan``: the parts' envelopes, the file's bytes, the wire bytes of all parts and an estimate of
  the tokens processing them will cost; for a source imported before, the parts carry only its
  changed sections (``delta``: ``importdelta.Delta``, ``sent_bytes``: their text), and a plan
  with no changed section has no parts and costs nothing (``estimate_tokens``), which asks for confirmation above
  ``CONFIRM_TOKENS``. The estimate counts each part's envelope with the ledger's tokenizer
  (``cmrunner.agentrt.tokencount``, loaded only here, on the first estimate) and applies the
  cost shape measured by ``bench/import_cost.py`` (docs/benchmarks.md, "Import cost"): a part is
  read once and carried by the requests after its read, and each job's requests carry the fixed
  instructions, tools and task; ``fixed_tokens``/``text_tokens`` name those two parts and
  ``estimate_words`` says them ("~4,700 tokens to process: fixed instructions ~4,400 + your text
  with its framing ~300": the text and its envelope, read once per part).
- ``cap_words`` states the requests a plan implies and, when it exceeds the hourly request cap or
  the daily token cap, how long the caps stretch it over and the ``cm config set spend.…``
  command that raises that cap.
- ``Carried``: what became of the parts that last carried a source's current sections; a plan
  is ``committed`` (the only "unchanged") when nothing is to send and all of them were processed.
- ``MAX_IMPORT_BYTES`` (16 MiB, about 20 M tokens to process: months of the default caps) is the
  largest file cm imports at all (``IMPORT_TOO_LARGE``, checked before the file is read).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field

from cmrunner.agentrt import budget
from cmrunner.core.errors import CmError
from cmrunner.manage.importdelta import Delta

MAX_IMPORT_BYTES = 16 << 20
# Above this estimate an import asks first (or needs --yes): about a twelfth of a heavy coding day
# (docs/benchmarks.md, "Default spend caps"); a file of up to about 130 KB of prose passes without a question.
CONFIRM_TOKENS = 100_000
# The cost shape of one part (one job), measured by bench/import_cost.py with a reader that makes
# one tool call per response: two requests (the task; then the first read, which returns the part
# and the memory documents whole, after which the submission ends the attempt), so the envelope is
# sent READS_PER_PART times and the fixed instructions, tools and task REQUESTS_PER_PART times.
READS_PER_PART = 1
REQUESTS_PER_PART = 2
FIXED_TOKENS_PER_REQUEST = 2_200


@dataclass(frozen=True, slots=True)
class Piece:
    """One part's text and where it sits in the file."""

    text: str
    heading_path: list[str]   # the headings above the part's first line
    blocks: list[dict]        # the file's block index entries of this part, lines relative to the part


JOIN_BYTES = 8  # a line break between two units, escaped three times


def _lines_bytes(lines: list[str]) -> int:
    """Wire bytes of these lines inside an envelope (escaped once there, twice more in a request)."""
    return budget.escaped_bytes(json.dumps("\n".join(lines), ensure_ascii=False)[1:-1])


def split(text: str, blocks: list[dict], limit: int, reserve: int, cap_code: str = "SOURCE_TOO_LARGE") -> list[Piece]:
    """The text's parts, each within ``limit`` wire bytes once its envelope's other fields
    (``reserve`` wire bytes) are added (see module contract)."""
    lines = text.split("\n")
    room = limit - reserve
    if _lines_bytes(lines) + _index_bytes(blocks) <= room:
        # a file's first block has no heading above it; an update's first section keeps its own
        return [Piece(text, list(blocks[0]["headingPath"]) if blocks else [], blocks)]
    by_start: dict[int, list[dict]] = {}
    for blk in blocks:
        by_start.setdefault(blk["lines"][0] - 1, []).append(blk)
    starts = sorted(set(by_start) | {0})
    spans: list[tuple[int, int]] = []
    start, size = 0, 0
    for unit_start, unit_end in zip(starts, starts[1:] + [len(lines)], strict=True):
        if unit_end <= unit_start:
            continue
        heading = any(blk["kind"] == "heading" for blk in by_start.get(unit_start, []))
        for a, b in _fit(lines, unit_start, unit_end, room, cap_code):
            cost = _lines_bytes(lines[a:b]) + JOIN_BYTES + (_index_bytes(by_start.get(a, [])) if a == unit_start else 0)
            if size and (size + cost > room or (heading and a == unit_start and size >= room * 3 // 4)):
                spans.append((start, a))
                start, size = a, 0
            size += cost
    spans.append((start, len(lines)))
    block_starts = [blk["lines"][0] - 1 for blk in blocks]
    return [_piece(lines, blocks, block_starts, a, b) for a, b in spans]


def _fit(lines: list[str], start: int, end: int, room: int, cap_code: str) -> list[tuple[int, int]]:
    """The unit itself, or line runs of it when it alone is larger than ``room``."""
    if _lines_bytes(lines[start:end]) + JOIN_BYTES <= room // 2:
        return [(start, end)]
    runs, a, size = [], start, 0
    for index in range(start, end):
        cost = _lines_bytes(lines[index:index + 1]) + JOIN_BYTES
        if cost > room // 2:
            raise CmError(cap_code, f"line {index + 1} alone is larger than one import part may carry "
                                    f"({room // 2:,} bytes as sent); break it into paragraphs, then import again")
        if size and size + cost > room // 2:
            runs.append((a, index))
            a, size = index, 0
        size += cost
    runs.append((a, end))
    return runs


def _within(blocks: list[dict], starts: list[int], a: int, b: int) -> list[dict]:
    """The blocks that start on 0-based lines ``[a, b)``; ``starts`` are their first lines, in order."""
    return blocks[bisect.bisect_left(starts, a):bisect.bisect_left(starts, b)]


def _index_bytes(blocks: list[dict]) -> int:
    return budget.escaped_bytes(json.dumps(blocks, ensure_ascii=False)) + JOIN_BYTES if blocks else 0


def _piece(lines: list[str], blocks: list[dict], starts: list[int], a: int, b: int) -> Piece:
    inside = [{**blk, "lines": [blk["lines"][0] - a, min(blk["lines"][1], b) - a]}
              for blk in _within(blocks, starts, a, b)]
    heading_path: list[str] = []
    previous = _within(blocks, starts, 0, a + 1)[-1:]  # the block in effect at the part's first line
    if previous:
        block = previous[0]
        heading_path = list(block["headingPath"])
        if block["kind"] == "heading" and block["lines"][0] - 1 < a:
            heading_path.append(_title(lines, block))
    return Piece("\n".join(lines[a:b]), heading_path, inside)


def _title(lines: list[str], heading: dict) -> str:
    return lines[heading["lines"][0] - 1].lstrip("#").strip()


FAILED_STATES = ("dead", "paused")
WAITING_STATES = ("buffered", "pending", "claimed")
LOST_STATES = ("cancelled", "quarantined")


@dataclass(frozen=True, slots=True)
class Carried:
    """What became of the parts that last carried a source's current sections: only a
    ``processed`` part committed what it carried; a failed one (dead or paused) can be retried
    (``failed``: its job ids and issues, once each, oldest first); a waiting one is queued and not
    yet processed; a lost one (cancelled, quarantined) is final for that text."""

    processed: int = 0
    waiting: int = 0
    failed: tuple[tuple[str, str | None], ...] = ()
    lost: int = 0

    @property
    def committed(self) -> bool:
        return not (self.waiting or self.failed or self.lost)


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated import split into parts, with its estimated cost (see module contract)."""

    scope: str
    import_id: str
    namespace: str
    envelopes: list[str]
    file_bytes: int
    wire_bytes: int
    tokens: int
    token_method: str
    source: str = ""                  # the source's stable key (``capture.importsections``)
    sections: list[tuple[str, str, bool]] = field(default_factory=list)  # the file's (digest, heading JSON, sent)
    basis: int = 0                    # the source's import this plan compares with (0: its first)
    delta: Delta | None = None        # against that import; None for a first import (all is sent)
    sent_bytes: int = 0               # UTF-8 bytes of the text the parts carry (the file's, or its changes)
    carried: Carried = Carried()      # what became of the parts that last carried its current sections
    retry_bytes: int = 0              # wire bytes of the failed parts that importing again retries
    retry_parts: int = 0              # how many failed parts importing again retries

    @property
    def count(self) -> int:
        return len(self.envelopes)

    @property
    def committed(self) -> bool:
        """Nothing to send and everything sent before reached memory: the only "unchanged"."""
        return self.count == 0 and self.carried.committed

    @property
    def retries(self) -> list[str]:
        """The failed jobs that importing this plan retries (``cm retry`` of each)."""
        return [job for job, _issue in self.carried.failed]

    @property
    def fixed_tokens(self) -> int:
        """The part of ``tokens`` that is the Memory Agent's fixed instructions, tools and task,
        carried by every request of every part to process, whatever the file holds."""
        return (self.count + self.retry_parts) * REQUESTS_PER_PART * FIXED_TOKENS_PER_REQUEST

    @property
    def text_tokens(self) -> int:
        """The part of ``tokens`` that is the file's own text (with its envelope), read per part."""
        return self.tokens - self.fixed_tokens

    @property
    def needs_confirmation(self) -> bool:
        return self.tokens > CONFIRM_TOKENS


def estimate_tokens(envelopes: list[str]) -> tuple[int, str]:
    """Tokens processing these parts will cost, and the tokenizer that counted them."""
    from cmrunner.agentrt import tokencount

    total, method = 0, tokencount.BYTES_SOURCE
    for envelope in envelopes:
        tokens, method = tokencount.estimate(envelope.encode("utf-8"))
        total += READS_PER_PART * tokens + REQUESTS_PER_PART * FIXED_TOKENS_PER_REQUEST
    return total, method


def estimate_words(tokens: int, fixed: int) -> str:
    """An estimate with its parts named: ``~4,700 tokens to process: fixed instructions ~4,400 +
    your text with its framing ~300`` (the fixed instructions dominate a small file; they are not the file's size)."""
    if tokens == 0:
        return "~0 tokens to process"
    return (f"~{tokens:,} tokens to process: fixed instructions ~{fixed:,} + your text with its framing "
            f"~{tokens - fixed:,}")


def cap_words(parts: int, tokens: int, spend: dict) -> str:
    """The requests an import of ``parts`` parts implies (``REQUESTS_PER_PART`` each) and what the
    spend caps (``Config.spend``) make of it and of ``tokens``: within them, or the time they
    stretch it over with the one command that raises the cap it exceeds (its work waits, never
    fails, while a cap is reached: ``core.spend``)."""
    requests = parts * REQUESTS_PER_PART
    said = f"~{requests:,} request{'s' if requests != 1 else ''} to the model ({REQUESTS_PER_PART} per part)"
    hourly, daily = spend.get("requestsPerHour"), spend.get("tokensPerDay")
    over = []
    if hourly == 0 or daily == 0:
        name = "requestsPerHour" if hourly == 0 else "tokensPerDay"
        return (f"{said}; spend.{name} is 0, which turns the Memory Agent off: it waits queued until "
                f"`cm config set spend.{name} N`")
    if hourly is not None and requests > hourly:
        over.append(f"more than the hourly cap of {hourly:,} requests: it takes at least "
                    f"{-(-requests // hourly)} hours, or `cm config set spend.requestsPerHour {requests}`")
    if daily is not None and tokens > daily:
        over.append(f"more than the daily cap of {daily:,} tokens: it takes at least {-(-tokens // daily)} days, "
                    f"or `cm config set spend.tokensPerDay {tokens}`")
    return f"{said}; " + ("; ".join(over) if over else "within the spend caps")
