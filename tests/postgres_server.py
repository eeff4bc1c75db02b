"""A private PostgreSQL server for tests: a temporary cluster on a free loopback port.

`PostgresServer.start()` runs Debian's `initdb` and `pg_ctl` (found under
/usr/lib/postgresql/<version>/bin, which is not on PATH) in a fresh temporary folder, listening
on 127.0.0.1 only, with password authentication for TCP connections. PostgreSQL refuses to
run as root, so where the tests run as root the server runs as the unprivileged `postgres`
user that Debian's package creates, and the folder is handed to that user. `stop()` stops the
server and removes the folder.

`start_for_tests()` is what the `postgres` fixture (tests/conftest.py) calls: where PostgreSQL
is missing it skips the test, saying why, except under `CI=true`, where .ci/run installs
PostgreSQL and a missing server is a failure, not a quiet skip.

Example:
    >>> server = PostgresServer.start()  # doctest: +SKIP
    >>> url = server.create_database("study")  # doctest: +SKIP
    >>> server.stop()  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import NoReturn

import pytest

from tests.deadlines import HANG_S

USER = "tfperf"
PASSWORD = "pg-s3cret-Pa55"
_BIN_GLOB = "/usr/lib/postgresql/*/bin"
_RUN_AS = "postgres"  # the account Debian's postgresql package creates
_START_TIMEOUT_S = 60


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries, or no unprivileged account to run them as root."""


def in_ci() -> bool:
    """Whether the tests run in CI (`CI=true`), where every component the tests use is installed."""
    return os.environ.get("CI") == "true"


def unavailable(reason: str) -> NoReturn:
    """Skips the calling test for `reason`; under `CI=true` fails it instead.

    CI installs every system part the tests use (.ci/run), so there a missing one is a broken
    setup that a skip would hide.
    """
    if in_ci():
        pytest.fail(f"{reason}. CI=true: CI must install it, so this is a failure.", pytrace=False)
    pytest.skip(reason)


def require_psycopg2() -> None:
    """Skips the calling test where psycopg2 is missing; under `CI=true` fails it instead."""
    if importlib.util.find_spec("psycopg2") is None:
        unavailable("this test needs psycopg2: `pip install -e '.[dev]'` installs psycopg2-binary")


def start_for_tests() -> PostgresServer:
    """A started server; skips the test (fails it under `CI=true`) where PostgreSQL is missing."""
    try:
        return PostgresServer.start()
    except PostgresUnavailable as error:
        unavailable(f"the PostgreSQL tests need a PostgreSQL server: {error}")


def find_bin_dir() -> Path:
    """The newest installed PostgreSQL's bin folder (on PATH, or Debian's versioned one)."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    candidates = [Path(p) for p in glob.glob(_BIN_GLOB) if (Path(p) / "initdb").is_file()]
    if not candidates:
        raise PostgresUnavailable(
            f"no PostgreSQL binaries: initdb is not on PATH nor under {_BIN_GLOB}; "
            "install Debian's `postgresql` package (.ci/run does)"
        )
    return max(candidates, key=lambda path: _version_key(path.parent.name))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclasses.dataclass
class PostgresServer:
    """A running private server; `url(db)` gives a psycopg2 URL with the test credentials."""

    bin_dir: Path
    folder: Path
    port: int
    run_as: str | None  # None: this (non-root) user runs the server

    @classmethod
    def start(cls) -> PostgresServer:
        bin_dir = find_bin_dir()
        run_as = _unprivileged_account()
        folder = Path(tempfile.mkdtemp(prefix="tfperf-pg-"))
        server = cls(bin_dir, folder, free_port(), run_as)
        try:
            server._init_cluster()
            server._pg_ctl("start", "-w", "-t", str(_START_TIMEOUT_S), "-o", server._options())
        except BaseException:
            server._remove_folder()
            raise
        return server

    def url(self, database: str, *, password: str = PASSWORD, port: int | None = None) -> str:
        return f"postgresql+psycopg2://{USER}:{password}@127.0.0.1:{port or self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Creates an empty database and returns its URL."""
        import psycopg2

        connection = psycopg2.connect(
            host="127.0.0.1", port=self.port, user=USER, password=PASSWORD, dbname="postgres"
        )
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        return self.url(name)

    def stop(self) -> None:
        try:
            self._pg_ctl("stop", "-m", "fast", "-w")
        finally:
            self._remove_folder()

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    def _init_cluster(self) -> None:
        password_file = self.folder / "password"
        password_file.write_text(PASSWORD + "\n", encoding="utf-8")
        if self.run_as is not None:
            account = pwd.getpwnam(self.run_as)
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            os.chown(password_file, account.pw_uid, account.pw_gid)
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            USER,
            f"--pwfile={password_file}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--no-sync",
        )

    def _options(self) -> str:
        # Sockets in the private folder: the default (/var/run/postgresql) may not be writable.
        return (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=100"
        )

    def _pg_ctl(self, *args: str) -> None:
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(self.data_dir),
            "-l",
            str(self.folder / "server.log"),
            *args,
        )

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", self.run_as, "--"] if self.run_as else []
        completed = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, check=False, timeout=HANG_S
        )
        if completed.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{Path(command[0]).name} {command[1:]} failed ({completed.returncode}):\n"
                f"{completed.stdout}{completed.stderr}{tail}"
            )

    def _remove_folder(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _unprivileged_account() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(_RUN_AS)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root, and PostgreSQL refuses root: no {_RUN_AS!r} account to run the "
            "server as (Debian's postgresql package creates it)"
        ) from None
    if shutil.which("runuser") is None:
        raise PostgresUnavailable("running as root, and `runuser` (util-linux) is missing")
    return _RUN_AS


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())
