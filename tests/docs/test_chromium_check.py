"""The browser test's chromium rule: skip with a reason on a developer's machine, fail on CI."""

import pytest
from chromium_check import chromium_or_skip, find_chromium


def test_a_missing_chromium_skips_with_the_reason(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        chromium_or_skip([None, "/nonexistent/chromium"])


def test_a_missing_chromium_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        chromium_or_skip([None, "/nonexistent/chromium"])


def test_an_installed_chromium_is_returned(tmp_path, monkeypatch):
    monkeypatch.setenv("CI", "true")
    executable = tmp_path / "chromium"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    assert chromium_or_skip([None, str(executable)]) == str(executable)
    assert find_chromium([str(tmp_path / "absent")]) is None
