"""The Markdown section model: targets, parsing rules, budgets, stable refs and edits."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from cmrunner.core import sections
from cmrunner.core.errors import CmError
from cmrunner.core.sections import Budgets, parse, put_section, remove_section

PROFILE = "# Profile\n\n"


def code_of(call: Callable[..., object], *args: object, **kwargs: object) -> str:
    with pytest.raises(CmError) as info:
        call(*args, **kwargs)
    return info.value.code


def invalid(text: str, target: str = "profile") -> CmError:
    with pytest.raises(CmError) as info:
        parse(target, text)
    assert info.value.code == "INVALID_DOCUMENT"
    return info.value


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- targets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("target,h1,path", [
    ("profile", "Profile", "memory/profile.md"),
    ("preferences", "Preferences", "memory/preferences.md"),
    ("project:a-B_9", "Project", "memory/projects/a-B_9.md"),
    ("project:" + "x" * 128, "Project", "memory/projects/" + "x" * 128 + ".md"),
])
def test_valid_targets_have_their_title_and_path(target: str, h1: str, path: str) -> None:
    assert sections.target_title(target) == h1
    assert sections.target_relpath(target) == path
    assert sections.missing_document_text(target) == f"# {h1}\n\n"


@pytest.mark.parametrize("target", [
    "", "Profile", "profile ", "project:", "project:" + "x" * 129, "project:a/b", "project:..",
    "project:a b", "project:é", "projects:a", "global", None, 7,
])
def test_invalid_targets_are_rejected(target: object) -> None:
    assert code_of(sections.target_title, target) == "INVALID_TARGET_REFERENCE"
    assert code_of(parse, target, None) == "INVALID_TARGET_REFERENCE"


def test_missing_document_reads_as_its_h1_and_hashes_as_missing() -> None:
    doc = parse("project:p1", None)
    assert doc.render() == "# Project\n\n"
    assert doc.exists is False
    assert doc.hash == sections.MISSING_HASH == sections.document_hash(None) == "missing"
    assert doc.sections == ()


def test_document_hash_is_sha256_of_the_bytes() -> None:
    data = b"# Profile\n\n## A\nx\n"
    assert parse("profile", data).hash == hashlib.sha256(data).hexdigest() == sections.document_hash(data)
    # an existing file with the missing-file text is not "missing"
    assert parse("profile", PROFILE).hash == sha(PROFILE)


def test_section_key_is_target_and_title_hash() -> None:
    assert sections.section_key("project:p", "Build") == "project:p:" + sha("Build")
    assert code_of(sections.section_key, "nope", "Build") == "INVALID_TARGET_REFERENCE"


# --- parsing ---------------------------------------------------------------------------------


def test_parse_finds_sections_with_byte_ranges_and_bodies() -> None:
    text = "# Profile\n\n## Name\nAda é\n\n## Work\n### Detail\n- item\n"
    doc = parse("profile", text.encode())
    data = text.encode()
    assert [s.title for s in doc.sections] == ["Name", "Work"]
    name, work = doc.sections
    assert data[name.start:name.end] == "## Name\nAda é\n\n".encode()
    assert name.body == "Ada é\n\n" and work.body == "### Detail\n- item\n"
    assert data[work.start:work.body_start] == b"## Work\n"
    assert work.end == len(data)
    assert doc.preamble_end == name.start == len(PROFILE)
    assert doc.render() == text


def test_last_heading_without_newline_has_empty_body() -> None:
    doc = parse("profile", "# Profile\n## A")
    assert doc.sections[0].body == "" and doc.render() == "# Profile\n## A"


def test_headings_inside_fences_are_body_text() -> None:
    text = ("# Profile\n\n## A\n```python\n# not h1\n## not h2\n===\n````\n~~~\n## still code\n```\n"
            "  ~~~~ \n## B\n~~~\n```\n## code\n~~~~~\n")
    doc = parse("profile", text)
    assert [s.title for s in doc.sections] == ["A", "B"]


def test_fence_needs_same_char_and_length_and_nothing_after() -> None:
    # "```` x" does not close a ```` fence, "~~~" does not close backticks, "```" is too short
    text = "# Profile\n\n## A\n````\n```\n~~~~\n```` x\n## inside\n````\n"
    assert [s.title for s in parse("profile", text).sections] == ["A"]


@pytest.mark.parametrize("opener", ["    ```", "\t```", "``", "> ```", "``` a`b"])
def test_lines_that_are_not_fences_do_not_hide_headings(opener: str) -> None:
    text = f"# Profile\n\n## A\n{opener}\n## B\n"
    assert [s.title for s in parse("profile", text).sections] == ["A", "B"]


def test_unclosed_fence_is_invalid_and_names_the_line() -> None:
    err = invalid("# Profile\n\n## A\ntext\n~~~\n## B\n")
    assert "line 5" in err.message and "never closed" in err.message


@pytest.mark.parametrize("text", [
    "", "# profile\n", "# Profile \n", " # Profile\n", "# Preferences\n", "\n# Profile\n",
    "\ufeff# Profile\n", "---\nk: v\n# yaml comment\n---\n# About me\n", "<!-- note -->\n# Me\n<!-- x\n## y\n-->\n",
])
def test_any_first_h1_or_none_is_kept_as_the_head(text: str) -> None:
    """A changed H1, front matter, comments and a byte order mark are the user's: kept byte for byte (issue 32)."""
    doc = parse("profile", text)
    assert doc.render() == text and doc.sections == () and doc.head_end == len(text.encode())


def test_the_h1_need_not_match_the_target() -> None:
    assert parse("preferences", "# Preferences\n").sections == ()
    assert parse("preferences", "# Profile\n").render() == "# Profile\n"
    assert parse("project:x", "# My project\n\n## A\n").sections[0].title == "A"


@pytest.mark.parametrize("line", ["# Other", "# Profile", "  # Indented", "#", "#\tTab"])
def test_a_second_h1_is_invalid(line: str) -> None:
    assert "line 4:" in invalid(f"# Profile\n\n## A\n{line}\n").message


@pytest.mark.parametrize("line", ["##", "## ", "##  Two spaces", "## Trailing ", "##\tTab", " ## Indented",
                                  "## Closing ##", "## #", "## A\tB", "## \u202eX"])
def test_non_canonical_h2_lines_are_invalid(line: str) -> None:
    assert "level-2 heading" in invalid(f"# Profile\n\n## A\n{line}\n").message


@pytest.mark.parametrize("line", ["#hashtag", "##nospace", "### Three", "    ## indented code", "###### Six",
                                  "## C#", "## a # b"])
def test_lines_that_are_not_h1_or_h2_are_body_or_valid_titles(line: str) -> None:
    parse("profile", f"# Profile\n\n## A\n{line}\n")


def test_duplicate_titles_are_one_unit_per_occurrence() -> None:
    doc = parse("profile", "# Profile\n\n## A\nx\n## B\n## A\ny\n")
    first, _, second = doc.sections
    assert (first.label, second.label) == ("A", "A (2)") and second.occurrence == 2
    assert first.ref != second.ref and doc.section(second.ref) is second and doc.by_title("A") is first
    assert second.digest == sha("A\0" + "2")
    replaced = put_section(doc, second.ref, "A", "z\n")
    assert replaced.render() == "# Profile\n\n## A\nx\n## B\n## A\nz\n"
    assert code_of(put_section, doc, None, "A", "w") == "DUPLICATE_SECTION_TITLE"
    assert code_of(put_section, doc, doc.sections[1].ref, "A", "w") == "DUPLICATE_SECTION_TITLE"


@pytest.mark.parametrize("pre", ["text", "### sub", "- item", "```\n```", "  x"])
def test_content_before_the_first_section_is_the_untitled_unit(pre: str) -> None:
    text = f"# Profile\n{pre}\n## A\n"
    doc = parse("profile", text)
    preamble = doc.preamble
    assert preamble is not None and preamble.untitled and preamble.title == "" and preamble.digest == sha("")
    assert doc.data[preamble.start:preamble.end] == f"{pre}\n".encode() and doc.head_end == preamble.start
    assert [s.title for s in doc.titled] == ["A"]
    assert remove_section(doc, preamble.ref).render() == "# Profile\n## A\n"
    assert put_section(doc, preamble.ref, "Notes", "kept\n").render() == "# Profile\n## Notes\nkept\n## A\n"
    assert sections.put_section_text(parse("profile", "# Profile\n## A\n"), None, "", f"{pre}\n").render() == text


def test_an_emptied_file_is_an_empty_document_that_starts_afresh() -> None:
    for text in ("", "\n\n", " \n"):
        doc = parse("profile", text)
        assert doc.sections == () and doc.exists
        assert put_section(doc, None, "A", "b\n").render() == "# Profile\n\n## A\nb\n"


def test_html_comments_hide_headings_and_must_close() -> None:
    doc = parse("profile", "# Profile\n\n## A\n<!-- old:\n## B\n# C\n-->\ntext <!-- x -->\n")
    assert [s.title for s in doc.sections] == ["A"]
    assert "line 3:" in invalid("# Profile\n\n<!-- never closed\n## A\n").message


def test_blank_lines_before_the_first_section_are_allowed() -> None:
    doc = parse("profile", "# Profile\n\n  \t\n\r\n## A\n")
    assert doc.preamble_end == doc.sections[0].start == len("# Profile\n\n  \t\n\r\n")


@pytest.mark.parametrize("underline", ["===", "---", "-", "=", "  ---  ", "====\t"])
def test_setext_underline_under_text_is_invalid(underline: str) -> None:
    assert "'=' or '-'" in invalid(f"# Profile\n\n## A\nsome text\n{underline}\n").message


@pytest.mark.parametrize("body", ["text\n\n---\n", "### h\n---\n", "```\nx\n```\n---\n",
                                  "---\n---\n", "***\n", "- - -\n", "text\n    ---\n", "text\n- - -\n"])
def test_thematic_breaks_and_non_setext_dashes_are_allowed(body: str) -> None:
    parse("profile", f"# Profile\n\n## A\n{body}")


def test_underline_directly_under_the_h2_line_is_a_thematic_break() -> None:
    parse("profile", "# Profile\n\n## A\n---\n")


def test_crlf_is_accepted_and_preserved() -> None:
    text = "# Profile\r\n\r\n## A\r\nx\r\n## B\r\ny\r\n"
    doc = parse("profile", text)
    assert [s.title for s in doc.sections] == ["A", "B"]
    assert doc.sections[0].body == "x\r\n"
    assert doc.render() == text


def test_crlf_fences_close() -> None:
    assert [s.title for s in parse("profile", "# Profile\r\n## A\r\n```\r\n## x\r\n```\r\n").sections] == ["A"]


@pytest.mark.parametrize("text", ["# Profile\r## A\n", "# Profile\n## A\nx\ry\n", "# Profile\n## A\nx\r"])
def test_bare_carriage_return_is_invalid(text: str) -> None:
    assert "carriage return" in invalid(text).message


def test_invalid_utf8_is_invalid_document() -> None:
    assert "UTF-8" in invalid(b"# Profile\n## A\n\xff\n").message  # type: ignore[arg-type]


def test_error_messages_never_echo_document_text() -> None:
    secret = "sk-verysecretvalue"
    for text in (f"# Profile\n## A\n# {secret}\n", f"# Profile\n```{secret}\n", f"# Profile\n<!-- {secret}\n",
                 f"# Profile\n## A\n{secret}\n---\n", f"# Profile\n## {secret} \n"):
        assert secret not in invalid(text).message


# --- budgets ---------------------------------------------------------------------------------


def test_default_budgets() -> None:
    assert Budgets(8192, 16384) == sections.DEFAULT_BUDGETS
    assert parse("profile", None).budgets.soft == 8192
    with pytest.raises(AttributeError):
        sections.DEFAULT_BUDGETS.hard = 64  # type: ignore[misc]


@pytest.mark.parametrize("soft,hard", [(1, 63), (1, 1_048_577), (65, 64), (0, 64), (-1, 100),
                                       (True, 100), (10, 100.0)])
def test_invalid_budgets_are_rejected(soft: object, hard: object) -> None:
    assert code_of(Budgets, soft, hard) == "INVALID_BUDGET"


@pytest.mark.parametrize("soft,hard", [(64, 64), (1, 1_048_576), (8192, 16384)])
def test_budget_bounds_are_inclusive(soft: int, hard: int) -> None:
    assert Budgets(soft, hard).hard == hard


def test_hard_budget_is_enforced_on_parse_in_bytes() -> None:
    budgets = Budgets(soft=64, hard=100)
    base = "# Profile\n## A\n"
    parse("profile", base + "x" * (100 - len(base)), budgets)
    assert code_of(parse, "profile", base + "x" * (101 - len(base)), budgets) == "DOCUMENT_TOO_LARGE"
    # 50 characters but 100 bytes + base: counted in UTF-8 bytes
    assert code_of(parse, "profile", base + "é" * 50, budgets) == "DOCUMENT_TOO_LARGE"
    assert code_of(parse, "profile", (base + "é" * 50).encode(), budgets) == "DOCUMENT_TOO_LARGE"


def test_soft_budget_is_informational() -> None:
    budgets = Budgets(soft=64, hard=200)
    doc = parse("profile", "# Profile\n## A\n" + "x" * 100 + "\n", budgets)
    assert doc.over_soft_budget and doc.size == len(doc.data)
    assert not parse("profile", None, budgets).over_soft_budget


def test_edit_result_is_held_to_the_hard_budget() -> None:
    budgets = Budgets(soft=64, hard=120)
    doc = parse("profile", "# Profile\n## A\n" + "a" * 50 + "\n", budgets)
    assert code_of(put_section, doc, None, "B", "b" * 60) == "DOCUMENT_TOO_LARGE"
    assert code_of(put_section, doc, None, "B", "b" * 10_000) == "DOCUMENT_TOO_LARGE"
    # replacing the big section with a smaller one fits
    smaller = put_section(doc, doc.sections[0].ref, "A", "a")
    assert put_section(smaller, None, "B", "b" * 60).size <= 120


# --- refs ------------------------------------------------------------------------------------


def test_ref_is_title_hash_prefix() -> None:
    doc = parse("profile", "# Profile\n## Work\n")
    assert doc.sections[0].ref == "sec_" + sha("Work")[:12]
    assert doc.sections[0].digest == sha("Work")


def test_refs_survive_unrelated_inserts_and_removals() -> None:
    doc = parse("profile", "# Profile\n\n## A\na\n## B\nb\n## C\nc\n")
    refs = {s.title: s.ref for s in doc.sections}
    doc2 = put_section(doc, None, "D", "d")
    doc3 = remove_section(doc2, refs["A"])
    doc4 = put_section(doc3, refs["B"], "B", "new b")
    for d in (doc2, doc3, doc4):
        for s in d.sections:
            if s.title in refs:
                assert s.ref == refs[s.title]
                assert d.section(refs[s.title]).title == s.title
    assert [s.title for s in doc4.sections] == ["B", "C", "D"]
    assert code_of(doc4.section, refs["A"]) == "INVALID_TARGET_REFERENCE"


def test_positional_or_malformed_refs_are_rejected() -> None:
    doc = parse("profile", "# Profile\n## A\n")
    good = doc.sections[0].ref
    for ref in ("s1", "sec_", good[:-1], good.upper(), good + "g", "sec_" + sha("A") + "0", None, 3, " " + good):
        assert code_of(doc.section, ref) == "INVALID_TARGET_REFERENCE"
    assert code_of(put_section, doc, "s1", "A", "x") == "INVALID_TARGET_REFERENCE"
    assert code_of(remove_section, doc, "s1") == "INVALID_TARGET_REFERENCE"


def test_longer_ref_prefixes_resolve() -> None:
    doc = parse("profile", "# Profile\n## A\n")
    for n in (12, 13, 40, 64):
        assert doc.section("sec_" + sha("A")[:n]).title == "A"


def test_colliding_prefixes_are_lengthened_and_ambiguous_refs_refused() -> None:
    digests = ["abcdef012345" + "0" * 52, "abcdef012345" + "1" + "0" * 51, "ffff" + "0" * 60]
    assert sections._refs(digests) == ["sec_abcdef0123450", "sec_abcdef0123451", "sec_ffff00000000"]
    doc = sections.Document("profile", b"", True, sections.DEFAULT_BUDGETS, 0, tuple(
        sections.Section(ref, t, d, 0, 0, 0, "") for ref, t, d in zip(sections._refs(digests), "xyz", digests)))
    assert code_of(doc.section, "sec_abcdef012345") == "INVALID_TARGET_REFERENCE"
    assert doc.section("sec_abcdef0123451").title == "y"
    assert doc.section("sec_ffff00000000").title == "z"


def test_refs_in_a_document_are_unique_and_minimal() -> None:
    titles = [f"Title {i}" for i in range(300)]
    doc = parse("profile", "# Profile\n" + "".join(f"## {t}\n" for t in titles), Budgets(64, 1_000_000))
    refs = [s.ref for s in doc.sections]
    assert len(set(refs)) == 300 and all(len(r) == 16 for r in refs)


# --- put / remove ----------------------------------------------------------------------------


def test_put_appends_with_trailing_newline() -> None:
    doc = put_section(parse("profile", "# Profile\n\n## A\na\n"), None, "B", "b")
    assert doc.render() == "# Profile\n\n## A\na\n## B\nb\n"
    assert put_section(doc, None, "C", "").render().endswith("## C\n")
    assert put_section(doc, None, "C", "c\n\n").render().endswith("## C\nc\n\n")


def test_put_on_missing_document_creates_it() -> None:
    doc = put_section(parse("preferences", None), None, "Style", "terse")
    assert doc.exists and doc.render() == "# Preferences\n\n## Style\nterse\n"
    assert doc.hash == sha(doc.render())


def test_append_to_a_file_without_final_newline_adds_one() -> None:
    doc = put_section(parse("profile", "# Profile\n## A\nlast"), None, "B", "b")
    assert doc.render() == "# Profile\n## A\nlast\n## B\nb\n"
    assert put_section(parse("profile", "# Profile"), None, "B", "b").render() == "# Profile\n## B\nb\n"


def test_put_with_ref_replaces_only_that_range() -> None:
    text = "# Profile\r\n\r\n## A\r\na  \r\n\r\n## B\nold\n## C\n```\n## x\n```"
    doc = parse("profile", text)
    new = put_section(doc, doc.by_title("B").ref, "B2", "new\n")
    assert new.render() == "# Profile\r\n\r\n## A\r\na  \r\n\r\n## B2\nnew\n## C\n```\n## x\n```"
    assert [s.title for s in new.sections] == ["A", "B2", "C"]


def test_replace_the_last_section_without_final_newline() -> None:
    doc = parse("profile", "# Profile\n## A\nx\n## B\ny")
    assert put_section(doc, doc.by_title("B").ref, "B", "z").render() == "# Profile\n## A\nx\n## B\nz\n"


def test_remove_deletes_only_that_range() -> None:
    doc = parse("profile", "# Profile\n\n## A\na\n## B\nb\n## C\nc")
    assert remove_section(doc, doc.by_title("B").ref).render() == "# Profile\n\n## A\na\n## C\nc"
    assert remove_section(doc, doc.by_title("C").ref).render() == "# Profile\n\n## A\na\n## B\nb\n"
    only = parse("profile", "# Profile\n\n## A\na\n")
    assert remove_section(only, only.sections[0].ref).render() == PROFILE


def test_put_duplicate_title_is_rejected() -> None:
    doc = parse("profile", "# Profile\n## A\n## B\n")
    assert code_of(put_section, doc, None, "A", "x") == "DUPLICATE_SECTION_TITLE"
    assert code_of(put_section, doc, doc.by_title("B").ref, "A", "x") == "DUPLICATE_SECTION_TITLE"
    # keeping its own title is a replacement, not a duplicate
    assert put_section(doc, doc.by_title("A").ref, "A", "x").by_title("A").body == "x\n"


@pytest.mark.parametrize("title", ["", " A", "A ", "A\nB", "A\rB", "A\tB", "\x00", "A\u2028B", "A \u202e",
                                   "A #", "##", "\ud800", None, 5])
def test_invalid_titles_are_rejected(title: object) -> None:
    assert code_of(put_section, parse("profile", None), None, title, "x") == "INVALID_SECTION_TITLE"
    assert sections.title_problem(title) is not None


@pytest.mark.parametrize("title", ["A", "C#", "Über ✓", "a # b", "#tag", "Build/test: `make`", "x" * 500])
def test_valid_titles_are_accepted(title: str) -> None:
    doc = put_section(parse("profile", None), None, title, "x")
    assert doc.sections[0].title == title and sections.title_problem(title) is None


@pytest.mark.parametrize("body,line", [
    ("ok\n## Sneaky\n", 2),
    ("# Top\n", 1),
    ("text\n===\n", 2),
    ("text\n---", 2),
    ("```\nopen\n", 1),
    ("x\ry", 1),
    ("a\n ## Indented\n", 2),
    ("a\n##\n", 2),
])
def test_bodies_that_would_change_structure_are_rejected(body: str, line: int) -> None:
    with pytest.raises(CmError) as info:
        put_section(parse("profile", None), None, "T", body)
    assert info.value.code == "INVALID_SECTION_BODY"
    assert f"body line {line}:" in info.value.message
    assert "Sneaky" not in info.value.message and "Top" not in info.value.message


def test_body_with_lower_headings_fences_and_crlf_is_accepted() -> None:
    body = "### Sub\r\n#### Deeper\n```\n## fenced\n# also\n```\n~~~~\n===\n~~~~\n\n---\n- list\n"
    doc = put_section(parse("profile", None), None, "T", body)
    assert doc.sections[0].body == body


def test_body_must_be_text() -> None:
    assert code_of(put_section, parse("profile", None), None, "T", b"x") == "INVALID_SECTION_BODY"
    assert code_of(put_section, parse("profile", None), None, "T", "\udc80") == "INVALID_SECTION_BODY"


def test_edits_do_not_mutate_the_original_document() -> None:
    doc = parse("profile", "# Profile\n## A\na\n")
    before = (doc.data, doc.sections)
    put_section(doc, None, "B", "b")
    remove_section(doc, doc.sections[0].ref)
    assert (doc.data, doc.sections) == before


# --- properties --------------------------------------------------------------------------------

_WORDS = st.sampled_from(["alpha", "Beta", "#tag", "C#", "x = 1", "é ✓", "`code`", "a | b", "> quote", "1."])
_EOL = st.sampled_from(["\n", "\r\n"])
_TITLE = st.lists(_WORDS, min_size=1, max_size=3).map(" ".join).filter(lambda t: sections.title_problem(t) is None)


@st.composite
def _block(draw: st.DrawFn) -> list[str]:
    """A body block as lines without terminators; blocks are separated by blank lines."""
    kind = draw(st.sampled_from(["para", "heading", "list", "fence", "rule", "quote"]))
    if kind == "para":
        return draw(st.lists(_WORDS, min_size=1, max_size=3))
    if kind == "heading":
        return [draw(st.sampled_from(["###", "####", "######"])) + " " + draw(_WORDS)]
    if kind == "list":
        return ["- " + w for w in draw(st.lists(_WORDS, min_size=1, max_size=3))]
    if kind == "rule":
        return [draw(st.sampled_from(["---", "***", "- - -", "___"]))]
    if kind == "quote":
        return ["> " + w for w in draw(st.lists(_WORDS, min_size=1, max_size=2))]
    char = draw(st.sampled_from("`~"))
    length = draw(st.integers(3, 5))
    # fence-like lines that must not close this fence: too short, or the other character
    shorter = char * (length - 1) if length > 3 else char * 2
    inner = draw(st.lists(st.sampled_from(["# not h1", "## not h2", "===", "---", "text", "", shorter,
                                           ("~" if char == "`" else "`") * 4]), max_size=4))
    closer = char * draw(st.integers(length, length + 2)) + draw(st.sampled_from(["", " ", "\t"]))
    indent = draw(st.sampled_from(["", " ", "   "]))
    return [indent + char * length + draw(st.sampled_from(["", "python"])), *inner, closer]


@st.composite
def _body(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for block in draw(st.lists(_block(), max_size=3)):
        if lines:
            lines.append("")
        lines.extend(block)
    lines.extend([""] * draw(st.integers(0, 2)))
    return "".join(line + draw(_EOL) for line in lines)


@st.composite
def valid_documents(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    target = draw(st.sampled_from(["profile", "preferences", "project:p-1"]))
    eol = draw(_EOL)
    text = "# " + sections.target_title(target) + eol
    text += "".join(draw(st.sampled_from(["", "  ", "\t"])) + draw(_EOL) for _ in range(draw(st.integers(0, 2))))
    titles = draw(st.lists(_TITLE, max_size=5, unique=True))
    for title in titles:
        text += "## " + title + draw(_EOL) + draw(_body())
    if draw(st.booleans()) and text.endswith("\n"):
        text = text.rstrip("\r\n")  # a file whose last line has no terminator
    return target, text, titles


_FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FAST
@given(valid_documents())
def test_property_parse_render_round_trip_is_byte_identical(case: tuple[str, str, list[str]]) -> None:
    target, text, titles = case
    doc = parse(target, text)
    assert doc.render() == text
    assert parse(target, text.encode()).data == text.encode()
    assert [s.title for s in doc.sections] == titles
    pieces = [doc.data[:doc.preamble_end]] + [doc.data[s.start:s.end] for s in doc.sections]
    assert b"".join(pieces) == doc.data


_NOISE = st.text(alphabet=st.sampled_from(list("#=-`~ \t\r\nab>*")), max_size=40)


@_FAST
@given(st.sampled_from(["profile", "project:x"]), _NOISE)
def test_property_arbitrary_text_parses_exactly_or_fails_with_a_code(target: str, noise: str) -> None:
    text = "# " + sections.target_title(target) + "\n## S\n" + noise
    try:
        doc = parse(target, text)
    except CmError as err:
        assert err.code == "INVALID_DOCUMENT"
        return
    assert doc.render() == text
    assert len({s.ref for s in doc.sections}) == len(doc.sections)
    assert len({(s.title, s.occurrence) for s in doc.sections}) == len(doc.sections)


_OPS = st.lists(st.tuples(st.sampled_from(["put_new", "put_ref", "remove"]), st.integers(0, 10), _TITLE,
                          st.one_of(_body().map(lambda b: (b, True)), _NOISE.map(lambda b: (b, False)))),
                max_size=8)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_documents(), _OPS, st.sampled_from([Budgets(64, 400), sections.DEFAULT_BUDGETS]))
def test_property_edits_keep_documents_valid_and_others_untouched(
        case: tuple[str, str, list[str]], ops: list[tuple[str, int, str, tuple[str, bool]]],
        budgets: Budgets) -> None:
    target, text, _ = case
    assume(len(text.encode()) <= budgets.hard)
    doc = parse(target, text, budgets)
    for kind, pick, title, (body, well_formed) in ops:
        before = {s.title: doc.data[s.start:s.end] for s in doc.sections}
        refs = {s.title: s.ref for s in doc.sections}
        chosen = doc.sections[pick % len(doc.sections)] if doc.sections else None
        try:
            if kind == "remove":
                if chosen is None:
                    continue
                touched = chosen.title
                new = remove_section(doc, chosen.ref)
            else:
                ref = chosen.ref if kind == "put_ref" and chosen is not None else None
                touched = chosen.title if ref is not None else None
                new = put_section(doc, ref, title, body)
        except CmError as err:
            assert err.code in {"DUPLICATE_SECTION_TITLE", "DOCUMENT_TOO_LARGE", "INVALID_SECTION_BODY"}
            if err.code == "DUPLICATE_SECTION_TITLE":
                assert title in before and title != touched
            if err.code == "INVALID_SECTION_BODY":
                assert not well_formed
            continue
        reparsed = parse(target, new.data, budgets)
        assert reparsed.render() == new.render()
        assert new.size <= budgets.hard
        titles = [s.title for s in new.sections]
        assert len(set(titles)) == len(titles)
        assert new.data[:new.preamble_end] == doc.data[:doc.preamble_end] or (
            not doc.sections and new.data[:new.preamble_end] == doc.data + b"\n")
        last = doc.sections[-1].title if doc.sections else None
        for s in new.sections:
            if s.title in before and s.title != touched and not (kind != "remove" and s.title == title):
                old = before[s.title]
                appended_after_unterminated = kind == "put_new" and s.title == last and not old.endswith(b"\n")
                assert new.data[s.start:s.end] == (old + b"\n" if appended_after_unterminated else old)
                assert s.ref == refs[s.title]
        if kind == "remove":
            assert touched not in titles and len(titles) == len(before) - 1
        else:
            assert new.by_title(title) is not None
            assert new.by_title(title).body.rstrip("\n") == body.rstrip("\n")
        doc = new
