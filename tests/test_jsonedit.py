"""The lossless JSON / JSONC settings editor: add then remove gives the bytes back, whatever the layout,
and nothing outside cm's entries changes; bad grammar is HOST_CONFIG_INVALID."""

from __future__ import annotations

import json
import re

import pytest

from cmrunner.core.errors import CmError
from cmrunner.manage.integrations import jsonedit
from cmrunner.manage.integrations.tomledit import Entry

GROUP = {"hooks": [{"type": "command", "command": "/venv/bin/python -I -m cmrunner hook claude --home /h",
                    "timeout": 3}]}
ENTRIES = [Entry(("hooks", "SessionStart"), GROUP, item=True), Entry(("hooks", "Stop"), GROUP, item=True),
           Entry(("mcpServers", "common_memory"), {"command": "/venv/bin/python", "args": ["-I"], "env": {}})]

LAYOUTS = {
    "empty object": "{}",
    "one line": '{"model": "opus", "hooks": {"Stop": [{"hooks": []}]}}',
    "two spaces": '{\n  "model": "opus",\n  "hooks": {\n    "Stop": [\n      {"hooks": []}\n    ]\n  }\n}\n',
    "tabs": '{\n\t"x": [1, 2],\n\t"mcpServers": {\n\t\t"mine": {"command": "true"}\n\t}\n}',
    "CRLF": '{\r\n    "a": 1,\r\n    "b": {"c": null}\r\n}\r\n',
    "user's empty hooks": '{\n  "hooks": {}\n}\n',
    "unicode and escapes": '{\n  "name": "Zoë \\"quoted\\" \\u00e9",\n  "path": "C:\\\\x"\n}\n',
}
COMMENTED = {
    "comments everywhere": '{\n  // top\n  "theme": "dark", // trailing\n  /* block */\n  "hooks": {\n'
                           '    "AfterAgent": [\n      // mine first\n      {"hooks": []}\n    ]\n  }\n}\n',
    "only a comment": "{\n  // nothing yet\n}\n",
    "comment markers in strings": '{\n  "url": "http://x//y", /* c */ "glob": "/*.md"\n}\n',
}


def _roundtrip(text: str, comments: bool) -> str:
    added, created = jsonedit.add(text, ENTRIES, "f.json", comments)
    # Still valid to the stdlib's strict parser once comments are blanked (real Gemini CLI reads the
    # commented form in tests/test_agents_cli.py).
    data = json.loads(jsonedit._blank_comments(added, "f.json", True) if comments else added)
    assert data["hooks"]["Stop"][-1] == GROUP and data["mcpServers"]["common_memory"]["args"] == ["-I"]
    assert all(jsonedit.find(added, e, "f.json", comments) is not None for e in ENTRIES)
    return jsonedit.remove(added, ENTRIES, "f.json", comments, created)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_add_then_remove_gives_the_same_bytes(name):
    assert _roundtrip(LAYOUTS[name], False) == LAYOUTS[name]


@pytest.mark.parametrize("name", list(COMMENTED))
def test_comments_are_kept_and_come_back_byte_for_byte(name):
    text = COMMENTED[name]
    added, _created = jsonedit.add(text, ENTRIES[:1], "f.json", True)
    for comment in re.findall(r"//[^\n]*|/\*.*?\*/", text.replace("http://x//y", "")):
        assert comment in added
    assert _roundtrip(text, True) == text


def test_an_empty_file_starts_as_an_object_and_remove_reports_it_empty():
    added, created = jsonedit.add("", ENTRIES, "f.json", False)
    assert () in created and added.startswith("{\n  \"hooks\": {\n    \"SessionStart\": [")
    assert jsonedit.is_empty(jsonedit.remove(added, ENTRIES, "f.json", False, created))


def test_only_what_cm_added_goes_and_a_users_neighbours_stay():
    text = '{\n  "hooks": {\n    "Stop": [\n      {"hooks": [{"type": "command", "command": "mine"}]}\n    ]\n  }\n}\n'
    added, created = jsonedit.add(text, ENTRIES[1:2], "f.json", False)
    assert created == set()  # hooks.Stop was the user's: it stays even when cm's item goes
    assert jsonedit.remove(added, ENTRIES[1:2], "f.json", False, created) == text


def test_a_member_cm_did_not_write_is_refused_and_one_changed_since_is_kept():
    text = '{"mcpServers": {"common_memory": {"command": "theirs"}}}'
    with pytest.raises(CmError) as refused:
        jsonedit.add(text, ENTRIES[2:], "f.json", False)
    assert refused.value.code == "UNMANAGED_ENTRY" and "mcpServers.common_memory" in refused.value.message
    added, created = jsonedit.add("{}", ENTRIES[2:], "f.json", False)
    changed = added.replace('"-I"', '"-X"')
    with pytest.raises(CmError) as modified:
        jsonedit.remove(changed, ENTRIES[2:], "f.json", False, created)
    assert modified.value.code == "HOST_FILE_MODIFIED"
    with pytest.raises(CmError) as not_object:
        jsonedit.add('{"hooks": []}', ENTRIES[:1], "f.json", False)
    assert not_object.value.code == "UNMANAGED_ENTRY"


@pytest.mark.parametrize("text,comments", [
    ('{"a": 1,}', False), ('{"a": 1,}', True), ("{// c\n}", False), ('{"a": NaN}', True), ('{"a": Infinity}', False),
    ("[1]", True), ('"x"', False), ("{/* open", True), ('{"a": 1} {"b": 2}', False), ("{'a': 1}", True),
    ('{"a": "\x01"}', False), ('{"a": 1}\ufeff', False), ("\ufeff\ufeff{}", True), ('{"a":\ufeff 1}', False),
])
def test_bad_grammar_is_host_config_invalid_naming_the_file(text, comments):
    with pytest.raises(CmError) as refused:
        jsonedit.add(text, ENTRIES, "/home/u/.gemini/settings.json", comments)
    assert refused.value.code == "HOST_CONFIG_INVALID" and "/home/u/.gemini/settings.json" in refused.value.message


@pytest.mark.parametrize("comments", [False, True])
@pytest.mark.parametrize("text", ["\ufeff{\n  \"model\": \"opus\"\n}\n", "\ufeff{}", "\ufeff", "\ufeff\r\n"])
def test_a_byte_order_mark_is_accepted_kept_and_given_back(text, comments):
    # Claude Code and Gemini CLI read a settings file that starts with a UTF-8 BOM; cm keeps it.
    added, created = jsonedit.add(text, ENTRIES, "f.json", comments)
    assert added.startswith("\ufeff{") and added.count("\ufeff") == 1
    assert json.loads(added[1:])["mcpServers"]["common_memory"]["args"] == ["-I"]
    assert all(jsonedit.find(added, e, "f.json", comments) is not None for e in ENTRIES)
    back = jsonedit.remove(added, ENTRIES, "f.json", comments, created)
    assert back == text if text.strip("\ufeff\r\n") else jsonedit.is_empty(back) and back.startswith("\ufeff")


def test_of_identical_items_the_one_cm_wrote_goes():
    mine = '{"hooks": {"Stop": [\n  ' + json.dumps(GROUP) + ',\n  {"x": 1}\n]}}'
    added, created = jsonedit.add(mine, ENTRIES[1:2], "f.json", False)
    [text] = jsonedit.inserted(added, ENTRIES[1:2], "f.json", False)
    assert json.loads(text) == GROUP and added.rindex(text) > added.index('{"x": 1}')
    # A copy the user pasted after cm's (laid out their way) is last: cm's recorded text still picks cm's.
    theirs = json.dumps(GROUP, indent=1)
    at = added.rindex(text) + len(text)
    moved = added[:at] + ", " + theirs + added[at:]
    recorded = Entry(("hooks", "Stop"), GROUP, item=True, text=text)
    back = jsonedit.remove(moved, [recorded], "f.json", False, created)
    assert theirs in back and back.count('"timeout": 3') == 2 and json.loads(back)["hooks"]["Stop"][1] == {"x": 1}
    assert jsonedit.remove(moved, ENTRIES[1:2], "f.json", False, created).count(theirs) == 0  # unrecorded: the last


def _spans(doc: jsonedit.Document) -> list[tuple[str, int, int]]:
    return [(key, child.start, child.end) for (key, _at), child in zip(doc.root.keys, doc.root.children)]


@pytest.mark.parametrize("name", list(LAYOUTS) + list(COMMENTED))
def test_an_edit_derives_the_same_parse_as_parsing_its_result_afresh(name):
    text, comments = (LAYOUTS[name], False) if name in LAYOUTS else (COMMENTED[name], True)
    results = []
    for entry in ENTRIES:  # each addition, then each removal, is one splice
        text, _created = jsonedit.add(text, [entry], "f.json", comments)
        results.append(text)
    for entry in ENTRIES:
        text = jsonedit.remove(text, [entry], "f.json", comments)
        results.append(text)
        derived = jsonedit._cache.get((text, "f.json", comments))
        assert derived is not None and _spans(derived) == _spans(jsonedit.Document(text, "f.json", comments))
    for text in results[-2:]:
        assert _spans(jsonedit.parse(text, "f.json", comments)) == _spans(jsonedit.Document(text, "f.json", comments))
