"""The private .env: the only source of the model key; never the process environment."""

from __future__ import annotations

import os
import stat

import pytest

from cmrunner.core import envfile
from cmrunner.core.errors import ConfigError


def test_key_comes_only_from_the_private_file(home, monkeypatch):
    monkeypatch.setenv("COMMON_MEMORY_API_KEY", "from-the-shell")
    assert envfile.get_secret(home, "COMMON_MEMORY_API_KEY") is None
    envfile.update(home, {"COMMON_MEMORY_API_KEY": "sk-private-value"})
    assert envfile.get_secret(home, "COMMON_MEMORY_API_KEY") == "sk-private-value"
    assert os.environ["COMMON_MEMORY_API_KEY"] == "from-the-shell"  # nothing is exported


def test_file_is_private_and_updates_preserve_other_values(home):
    envfile.update(home, {"A": "1", "B": "2"})
    envfile.update(home, {"A": None, "C": "3"})
    path = os.path.join(home, ".env")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert envfile.read(home) == {"B": "2", "C": "3"}


def test_parse_accepts_export_quotes_and_comments():
    text = "# c\nexport A='x y'\nB = \"z\"\n\nC=plain\n"
    assert envfile.parse(text) == {"A": "x y", "B": "z", "C": "plain"}


def test_empty_value_counts_as_missing(home):
    envfile.update(home, {"K": ""})
    assert envfile.get_secret(home, "K") is None


def test_malformed_line_names_the_line_not_the_value(home):
    os.makedirs(home)
    with open(os.path.join(home, ".env"), "w") as handle:
        handle.write("GOOD=1\nthis is sk-secret-material\n")
    with pytest.raises(ConfigError) as caught:
        envfile.read(home)
    assert caught.value.code == "ENV_INVALID"
    assert "line 2" in caught.value.message and "secret" not in caught.value.message


def test_multiline_values_are_refused(home):
    with pytest.raises(ConfigError) as caught:
        envfile.update(home, {"K": "a\nb"})
    assert caught.value.code == "ENV_INVALID"


def test_written_values_round_trip_through_dotenv_itself(home):
    from dotenv import dotenv_values

    awkward = {"QUOTES": "it's \"q\"", "HASH": "a #not-a-comment", "SLASH": "C:\\path\\", "SPACE": "  x  "}
    envfile.update(home, awkward)
    assert envfile.read(home) == awkward
    assert dotenv_values(os.path.join(home, ".env"), interpolate=False) == awkward


def test_malformed_line_after_blank_lines_names_its_own_line(home):
    os.makedirs(home)
    with open(os.path.join(home, ".env"), "w") as handle:
        handle.write("A=1\n\n\nnot a binding\n")
    with pytest.raises(ConfigError) as caught:
        envfile.read(home)
    assert "line 4" in caught.value.message


def test_a_multiline_quoted_value_is_refused_on_read(home):
    os.makedirs(home)
    with open(os.path.join(home, ".env"), "w") as handle:
        handle.write('A=1\nK="first\nsecond"\n')
    with pytest.raises(ConfigError) as caught:
        envfile.read(home)
    assert caught.value.code == "ENV_INVALID" and "line 2" in caught.value.message and "second" not in caught.value.message
