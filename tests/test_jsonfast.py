"""cmrunner.core.jsonfast gives exactly what the json package gives, on random documents and on bad input."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from cmrunner.core import jsonfast


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(10 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.randrange(-10**30, 10**30)
    if kind == 3:
        return rng.choice([0.1, -2.5e300, 1e-320, float("nan"), float("inf"), float("-inf"), 3.0])
    if kind in (4, 5):
        points = [rng.randrange(0, 0x80), rng.randrange(0x80, 0x3000), 0x2028, 0x1F600, rng.randrange(0xD800, 0xE000)]
        return "".join(chr(rng.choice(points)) for _ in range(rng.randrange(6)))
    if kind in (6, 7):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["a", "b", "é", "\n", "Z", "\u202e", *(f"k{n}" for n in range(9))]
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_random_documents_encode_and_parse_as_json_does():
    rng = random.Random(20261202)
    for _ in range(3000):
        value = _value(rng)
        for sort_keys in (False, True):
            for separators in ((", ", ": "), (",", ":")):
                expected = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=separators)
                assert jsonfast.dumps(value, sort_keys=sort_keys, separators=separators) == expected
        text = rng.choice(["", " ", "\n\t"]) + json.dumps(value, ensure_ascii=rng.random() < 0.5) + rng.choice(["", "\r\n"])
        # Compared through json.dumps: NaN != NaN, but both must parse to the same document.
        assert json.dumps(jsonfast.loads(text)) == json.dumps(json.loads(text))


def test_keys_that_are_not_strings_and_values_json_refuses():
    assert jsonfast.dumps({1: 2, False: 3, None: 4, 2.5: 5}) == json.dumps({1: 2, False: 3, None: 4, 2.5: 5}, ensure_ascii=False)
    for bad in (object(), {(1,): 2}, {1, 2}, b"x"):
        with pytest.raises(TypeError):
            json.dumps(bad)
        with pytest.raises(TypeError):
            jsonfast.dumps(bad)


@pytest.mark.parametrize("text", ["", " ", "[1,]", "{} x", "\ufeff{}", "{'a':1}", '"\x01"', '{"a":}', "tru", "01",
                                  "[", "]", "1 2", "{}\x00", "\x0c{}", "\u00a0{}", '"\\x"'])
def test_bad_documents_are_a_value_error_as_with_json(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        jsonfast.loads(text)


@pytest.mark.parametrize("text", ['"\\ud800"', "NaN", "-Infinity", '{"a":1,"a":2}', " 7 "])
def test_what_json_accepts_it_accepts_alike(text):
    assert json.dumps(jsonfast.loads(text)) == json.dumps(json.loads(text))


def test_absurd_nesting_is_a_recursion_error_as_with_json():
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(deep)
    with pytest.raises(RecursionError):
        jsonfast.loads(deep)


def test_bad_documents_are_a_value_error_where_nothing_imported_json():
    """The hook process never imports json: the scanner's error path must still be a ValueError."""
    bad = ["{not json", "[1,]", '{"a":}', "1 2", "", "\ufeff{}"]
    code = ("import sys\nfrom cmrunner.core import jsonfast\nassert 'json' not in sys.modules\n"
            f"assert jsonfast.loads(' [1, {{\"a\": null}}] ') == [1, {{'a': None}}]\nassert 'json' not in sys.modules\n"
            f"for text in {bad!r}:\n"
            "    try:\n        jsonfast.loads(text)\n    except ValueError:\n        pass\n"
            "    else:\n        raise SystemExit('accepted ' + repr(text))\n")
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
