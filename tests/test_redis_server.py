"""The test rig's Redis: Debian's ``redis-server`` on loopback that a test can stop and start again,
skipped with the reason on a developer's machine without it, failed under CI."""

import pytest
from redis_server import answers_ping, redis_server_or_skip


def test_a_missing_redis_server_skips_with_the_reason(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="redis-server is not installed"):
        redis_server_or_skip([None, "/nonexistent/redis-server"])


def test_a_missing_redis_server_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        redis_server_or_skip([None, "/nonexistent/redis-server"])


def test_the_fixture_serves_loopback_and_stops_and_starts_on_the_same_url(redis):
    url = redis.url
    assert url == f"redis://127.0.0.1:{redis.port}/0" and answers_ping(redis.port)
    redis.stop()
    assert not answers_ping(redis.port)
    redis.start()
    assert redis.url == url and answers_ping(redis.port)
    config = redis.argv()
    assert config[config.index("--bind") + 1] == "127.0.0.1" and config[config.index("--save") + 1] == ""
