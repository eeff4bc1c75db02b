"""The `postgres` fixture where PostgreSQL is missing: a skip that says why, a failure in CI."""

from __future__ import annotations

import pytest

from tests import postgres_server


@pytest.fixture
def no_postgres(monkeypatch, tmp_path):
    """A machine without PostgreSQL: no initdb on PATH nor under Debian's versioned folders."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(postgres_server, "_BIN_GLOB", str(tmp_path / "*" / "bin"))


def test_missing_postgres_skips_with_the_reason_outside_ci(no_postgres, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as raised:
        postgres_server.start_for_tests()
    message = str(raised.value)
    assert message.startswith("the PostgreSQL tests need a PostgreSQL server: no PostgreSQL")
    assert "install Debian's `postgresql` package" in message


def test_missing_postgres_fails_under_ci(no_postgres, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as raised:
        postgres_server.start_for_tests()
    message = str(raised.value)
    assert message.startswith("the PostgreSQL tests need a PostgreSQL server: no PostgreSQL")
    assert message.endswith("CI=true: CI must install it, so this is a failure.")


def test_fixture_server_takes_connections_with_the_test_credentials(postgres):
    import psycopg2

    url = postgres.create_database("fixture_check")
    assert url == (
        f"postgresql+psycopg2://{postgres_server.USER}:{postgres_server.PASSWORD}"
        f"@127.0.0.1:{postgres.port}/fixture_check"
    )
    connection = psycopg2.connect(
        host="127.0.0.1",
        port=postgres.port,
        user=postgres_server.USER,
        password=postgres_server.PASSWORD,
        dbname="fixture_check",
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_database()")
            assert cursor.fetchone() == ("fixture_check",)
    finally:
        connection.close()
