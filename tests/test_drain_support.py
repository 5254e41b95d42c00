"""The crash tests' end-state check fails when it has nothing to check: a receipt file it expects
is missing, or the store holds other receipts than the test expects."""

from __future__ import annotations

import os

import pytest
from drain_support import check_end_state
from history_support import run_commits


def test_check_end_state_fails_on_missing_receipts_and_on_a_count_that_is_not_the_tests(home, tmp_path):
    paths, _after = run_commits(home, tmp_path, count=2)  # checks itself: two receipts, both published
    with pytest.raises(AssertionError, match="expected 3 receipts"):
        check_end_state(paths, receipts=3)
    for name in os.listdir(paths.receipts):
        os.unlink(os.path.join(paths.receipts, name))
    with pytest.raises(AssertionError, match="2 receipt files expected"):
        check_end_state(paths, receipts=2)
