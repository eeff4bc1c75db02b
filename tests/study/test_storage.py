"""Study storage: default URLs, real SQLite and journal files, masking, and error messages."""

from __future__ import annotations

import logging
import os
import socket
import sys
import warnings
from pathlib import Path

import optuna
import pytest
import sqlalchemy.exc

from tests.postgres_server import require_psycopg2
from tfperf.errors import TfperfError
from tfperf.study._storage import study_name_for
from tfperf.study.storage import StorageError, default_storage_url, mask_url, open_storage


def storage_error(url: str, **kwargs) -> str:
    with pytest.raises(StorageError) as caught:
        open_storage(url, **kwargs)
    return str(caught.value)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def add_study(storage, name: str) -> None:
    study = optuna.create_study(storage=storage, study_name=name)
    study.enqueue_trial({"x": 3})
    study.optimize(lambda trial: trial.suggest_int("x", 0, 10) ** 2, n_trials=1)


def assert_study(storage, name: str) -> None:
    study = optuna.load_study(storage=storage, study_name=name)
    assert [(trial.params, trial.value) for trial in study.trials] == [({"x": 3}, 9.0)]


def test_default_url_is_an_absolute_sqlite_file_named_after_the_pipeline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = default_storage_url(Path("examples/cv/pipeline.py"))
    assert url == f"sqlite:///{tmp_path.resolve().as_posix()}/studies/pipeline.db"
    assert (tmp_path / "studies").is_dir()


def test_default_url_honours_the_studies_dir(tmp_path):
    url = default_storage_url(Path("p.py"), tmp_path / "deep" / "runs")
    assert url == f"sqlite:///{tmp_path.resolve().as_posix()}/deep/runs/p.db"
    assert (tmp_path / "deep" / "runs").is_dir()


def test_study_name_is_the_file_stem():
    assert study_name_for(Path("some/dir/my_pipeline.py")) == "my_pipeline"


def test_sqlite_study_survives_reopening(tmp_path):
    url = default_storage_url(tmp_path / "pipeline.py", tmp_path / "studies")
    storage = open_storage(url)
    assert isinstance(storage, optuna.storages.RDBStorage)
    assert storage.engine_kwargs == {"connect_args": {"timeout": 60}}
    add_study(storage, "pipeline")
    storage.engine.dispose()

    assert_study(open_storage(url), "pipeline")


def test_relative_sqlite_path_is_taken_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    add_study(open_storage("sqlite:///study.db"), "s")
    assert (tmp_path / "study.db").is_file()


def test_heartbeat_settings_reach_the_rdb_storage(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = open_storage(f"sqlite:///{tmp_path}/s.db", heartbeat_interval=30, grace_period=90)
    assert (storage.heartbeat_interval, storage.grace_period) == (30, 90)


@pytest.mark.parametrize("name", ["heartbeat_interval", "grace_period"])
def test_heartbeat_settings_must_be_positive(tmp_path, name):
    message = storage_error(f"sqlite:///{tmp_path}/s.db", **{name: 0})
    assert message == f"`{name} > 0` must hold, but got {name}=0."


def test_journal_storage_with_an_absolute_path_survives_reopening(tmp_path):
    url = f"journal://{tmp_path.as_posix()}/study.log"
    storage = open_storage(url)
    assert isinstance(storage, optuna.storages.JournalStorage)
    add_study(storage, "j")

    assert_study(open_storage(url), "j")
    assert (tmp_path / "study.log").is_file()


def test_journal_storage_with_a_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "studies").mkdir()
    add_study(open_storage("journal://studies/study.log"), "j")
    assert_study(open_storage(f"journal:///{(tmp_path / 'studies' / 'study.log').as_posix()}"), "j")


def test_journal_storage_takes_heartbeat_settings_quietly(tmp_path, caplog):
    # tfperf.study._cluster beats for journal trials itself, so there is nothing to warn about.
    with caplog.at_level(logging.WARNING):
        storage = open_storage(f"journal://{tmp_path.as_posix()}/s.log", heartbeat_interval=10)
    assert isinstance(storage, optuna.storages.JournalStorage)
    assert caplog.text == ""


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://user:secret@host/db", "postgresql://user:***@host/db"),
        (
            "postgresql+psycopg2://tuner:s3cr%40t@db.example.com:5432/studies",
            "postgresql+psycopg2://tuner:***@db.example.com:5432/studies",
        ),
        (
            "mysql+pymysql://me:secret@db:3306/t?charset=utf8",
            "mysql+pymysql://me:***@db:3306/t?charset=utf8",
        ),
        ("mysql+pymysql://me:p@ss@db:3306/t", "mysql+pymysql://me:***@db:3306/t"),
        ("postgresql://me:a/b?c@db/t", "postgresql://me:***@db/t"),
        ("postgresql://db/t?user=me&password=secret", "postgresql://db/t?user=me&password=***"),
        ("redis://:secret@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("postgresql://user@host/db", "postgresql://user@host/db"),
        ("sqlite:////abs/studies/p.db", "sqlite:////abs/studies/p.db"),
        ("journal:///abs/studies/p.log", "journal:///abs/studies/p.log"),
        ("journal://user:secret@odd/p.log", "journal://user:***@odd/p.log"),
        ("just some text", "just some text"),
        ("", ""),
    ],
)
def test_mask_url(url, masked):
    assert mask_url(url) == masked


def test_unreachable_postgres_names_the_server_and_hides_the_password():
    require_psycopg2()
    url = f"postgresql+psycopg2://tuner:secret@127.0.0.1:{closed_port()}/studies"
    message = storage_error(url)
    assert "secret" not in message
    assert message.startswith("Storage postgresql+psycopg2://tuner:***@127.0.0.1:")
    assert "cannot reach the database server at 127.0.0.1:" in message


def test_missing_psycopg2_names_the_pip_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    url = f"postgresql+psycopg2://tuner:secret@127.0.0.1:{closed_port()}/studies"
    message = storage_error(url)
    assert "secret" not in message
    assert message.startswith("Storage postgresql+psycopg2://tuner:***@127.0.0.1:")
    assert "pip install psycopg2-binary" in message


def test_default_postgres_driver_message_names_both_packages(monkeypatch):
    for module in ("psycopg", "psycopg2", "pg8000"):
        monkeypatch.setitem(sys.modules, module, None)
    message = storage_error("postgresql://tuner:secret@127.0.0.1:1/studies")
    assert "secret" not in message
    assert 'pip install "psycopg[binary]"' in message
    assert "pip install psycopg2-binary" in message


def test_a_url_without_driver_uses_psycopg2_when_psycopg_is_missing(monkeypatch):
    require_psycopg2()
    monkeypatch.setitem(sys.modules, "psycopg", None)
    message = storage_error(f"postgresql://tuner:secret@127.0.0.1:{closed_port()}/studies")
    # psycopg2 was used: the server is unreachable, no driver is missing.
    assert "cannot reach the database server at 127.0.0.1:" in message
    assert "pip install" not in message
    assert "secret" not in message


def test_missing_default_mysql_driver_names_the_pip_package(monkeypatch):
    for module in ("MySQLdb", "pymysql", "mysql.connector", "mysql"):
        monkeypatch.setitem(sys.modules, module, None)
    message = storage_error("mysql://tuner:secret@127.0.0.1:1/studies")
    assert "secret" not in message
    assert "the mysql driver 'MySQLdb' is not installed" in message
    assert "pip install mysqlclient" in message


def test_missing_mysql_driver_names_the_pip_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymysql", None)
    message = storage_error("mysql+pymysql://tuner:secret@127.0.0.1:1/studies")
    assert message == (
        "Storage mysql+pymysql://tuner:***@127.0.0.1:1/studies: the mysql driver 'pymysql' is "
        "not installed. Install it with: pip install PyMySQL"
    )


class DriverError(Exception):
    """Stands in for a DBAPI error (psycopg2.OperationalError and the like)."""


def fail_with(monkeypatch, driver_message: str) -> None:
    def refuse(*args, **kwargs):
        raise sqlalchemy.exc.OperationalError("SELECT 1", {}, DriverError(driver_message))

    monkeypatch.setattr(optuna.storages, "RDBStorage", refuse)


URL = "postgresql+psycopg2://tuner:s%40cret@db.example.com:5432/studies"


@pytest.mark.parametrize(
    ("driver_message", "expected"),
    [
        (
            'connection to server at "db.example.com", port 5432 failed: FATAL:  password '
            'authentication failed for user "tuner" (password s@cret)',
            "authentication failed for user 'tuner' at db.example.com:5432",
        ),
        (
            "(1045, \"Access denied for user 'tuner'@'10.0.0.2' (using password: YES)\")",
            "Check the user name and password in the URL.",
        ),
        (
            'connection to server at "db.example.com", port 5432 failed: Connection refused',
            "cannot reach the database server at db.example.com:5432",
        ),
        (
            'could not translate host name "db.example.com" to address: Name or service not known',
            "Is the server running, and are the host and port right?",
        ),
        ('FATAL:  database "studies" does not exist', "has no database 'studies'"),
        ("something new s%40cret", "cannot open the study storage (DriverError: something new"),
    ],
)
def test_server_errors_are_sorted_and_masked(monkeypatch, driver_message, expected):
    fail_with(monkeypatch, driver_message)
    message = storage_error(URL)
    assert expected in message
    assert message.startswith("Storage postgresql+psycopg2://tuner:***@db.example.com:5432/")
    assert "s@cret" not in message
    assert "s%40cret" not in message


def test_storage_error_is_a_tfperf_error_without_a_cause(monkeypatch):
    fail_with(monkeypatch, "password authentication failed")
    with pytest.raises(TfperfError) as caught:
        open_storage(URL)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_sqlite_path_may_hold_an_at_sign(tmp_path):
    folder = tmp_path / "me@host"
    folder.mkdir()
    add_study(open_storage(f"sqlite:///{folder}/s.db"), "s")
    assert (folder / "s.db").is_file()


def test_sqlite_in_a_missing_folder(tmp_path):
    folder = tmp_path / "nope"
    message = storage_error(f"sqlite:///{folder}/s.db")
    assert message == (
        f"Storage sqlite:///{folder}/s.db: the folder {str(folder)!r} for the SQLite file does "
        f"not exist. Create it (mkdir -p {folder}) or point the URL elsewhere; note that "
        "sqlite:///x.db is relative to the working directory and sqlite:////x.db absolute."
    )


def test_sqlite_in_an_unwritable_folder(tmp_path, monkeypatch):
    # Tests may run as root, which writes anywhere: fake the permission check instead.
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != tmp_path)
    message = storage_error(f"sqlite:///{tmp_path}/s.db")
    assert f"{str(tmp_path)!r} is not writable by this user" in message


def test_sqlite_on_a_file_that_is_not_a_database(tmp_path):
    (tmp_path / "notes.db").write_text("hello\n" * 200, encoding="utf-8")
    message = storage_error(f"sqlite:///{tmp_path}/notes.db")
    assert "is not an SQLite database" in message


def test_journal_in_a_missing_folder(tmp_path):
    message = storage_error(f"journal://{tmp_path.as_posix()}/nope/s.log")
    assert "for the journal file does not exist" in message


def test_journal_on_a_file_that_is_not_a_journal(tmp_path):
    (tmp_path / "s.log").write_text("not json\nstill not\n", encoding="utf-8")
    message = storage_error(f"journal://{tmp_path.as_posix()}/s.log")
    assert "cannot use" in message
    assert "as an Optuna journal" in message


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("studies/p.db", "Did you mean sqlite:///studies/p.db?"),
        ("studies/p.log", "Did you mean journal://studies/p.log?"),
        ("postgres://me:secret@db/t", "spells the scheme postgresql://, not postgres://"),
        ("redis://:secret@localhost:6379/0", "Accepted: sqlite:///relative/path.db"),
        ("postgresql://me:p@ss:word@db/t", "Percent-encode an '@'"),
    ],
)
def test_unknown_forms_list_the_accepted_ones(url, hint):
    message = storage_error(url)
    assert hint in message
    assert "mysql+pymysql://user:password@host:3306/dbname (pip install PyMySQL)" in message
    assert "secret" not in message
    assert "ss:word" not in message


def test_an_at_sign_in_the_password_is_refused_before_connecting():
    message = storage_error("postgresql://me:hun@ter2@db.example.com/t")
    assert "Percent-encode an '@'" in message
    assert "hun" not in message
    assert "ter2" not in message


def test_opening_is_retried_while_another_tuner_creates_the_tables(monkeypatch):
    attempts = []

    def racing(*args, **kwargs):
        attempts.append(args[0])
        if len(attempts) < 3:
            raise sqlalchemy.exc.IntegrityError(
                "CREATE TYPE studydirection",
                {},
                DriverError(
                    'duplicate key value violates unique constraint "pg_type_typname_nsp_index"'
                ),
            )
        return "storage"

    monkeypatch.setattr(optuna.storages, "RDBStorage", racing)
    monkeypatch.setattr("tfperf.study._storage.time.sleep", lambda seconds: None)
    assert open_storage(URL) == "storage"
    assert attempts == [URL] * 3


def test_other_integrity_errors_are_not_retried(monkeypatch):
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise sqlalchemy.exc.IntegrityError("INSERT", {}, DriverError("null value in column"))

    monkeypatch.setattr(optuna.storages, "RDBStorage", refuse)
    message = storage_error(URL)
    assert len(calls) == 1
    assert "cannot open the study storage (DriverError: null value in column)" in message


def test_journal_on_a_read_only_file_system_says_so(read_only_dir):
    message = storage_error(f"journal://{read_only_dir.as_posix()}/s.log")
    if os.geteuid() == 0:  # a read-only mount
        assert "is on a read-only file system" in message
    else:  # a folder of mode 0555
        assert "is not writable by this user" in message
    assert "another kind of file" not in message


def test_a_full_disk_during_a_study_is_named_not_an_internal_error(small_tmpfs):
    from tests.mounts import fill
    from tfperf.study.storage import explain_storage_failure

    url = f"sqlite:///{small_tmpfs}/s.db"
    study = optuna.create_study(study_name="s", storage=url)
    fill(small_tmpfs)
    with pytest.raises(optuna.exceptions.StorageInternalError) as raised:  # wraps the driver
        study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=50)
    explained = explain_storage_failure(url, raised.value)
    assert explained is not None
    assert str(explained).startswith(f"the disk holding {small_tmpfs}/s.db is full")
    assert "run the same command again to resume" in str(explained)


def test_a_damaged_study_file_names_the_recovery(tmp_path):
    import sqlite3

    from tfperf.study.storage import explain_storage_failure

    error = sqlite3.DatabaseError("database disk image is malformed")
    explained = explain_storage_failure(f"sqlite:///{tmp_path}/s.db", error)
    assert str(explained) == (
        f"{tmp_path}/s.db is damaged (SQLite: database disk image is malformed); "
        f"`sqlite3 {tmp_path}/s.db .recover | sqlite3 recovered.db` saves what can be read, or "
        "start a new study with --study and another --storage."
    )
    assert explain_storage_failure("sqlite:///x.db", ValueError("a bug")) is None


def test_sqlite_opening_is_retried_when_another_tuner_created_a_table_meanwhile(
    tmp_path, monkeypatch
):
    """Two tuners opening one new SQLite file: the one whose CREATE TABLE comes second fails
    with "table ... already exists" (the other made it between the check and the create) and
    finds the tables on its next look, as on PostgreSQL."""
    import sqlite3

    calls = []

    class RacedOnce(optuna.storages.RDBStorage):
        def __init__(self, url, **kwargs):
            calls.append(url)
            if len(calls) == 1:
                cause = sqlite3.OperationalError("table study_directions already exists")
                raise sqlalchemy.exc.OperationalError("CREATE TABLE study_directions", {}, cause)
            super().__init__(url, **kwargs)

    monkeypatch.setattr(optuna.storages, "RDBStorage", RacedOnce)
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    assert len(calls) == 2
    optuna.create_study(storage=storage, study_name="s")
    assert [s.study_name for s in optuna.get_all_study_summaries(storage)] == ["s"]


def test_sqlite_opening_is_retried_when_another_tuner_stamped_the_schema_meanwhile(
    tmp_path, monkeypatch
):
    """The race CI met with two processes on one new file: both find alembic_version empty,
    the other stamps it first, and this one's stamp fails on real SQLite with "UNIQUE
    constraint failed: alembic_version.version_num"; the next look finds it stamped."""
    from alembic.runtime.migration import HeadMaintainer

    url = f"sqlite:///{tmp_path / 'study.db'}"
    insert = HeadMaintainer._insert_version
    stamps = []

    def the_other_tuner_stamps_after_this_look(self, version):
        stamps.append(version)
        if len(stamps) == 1:
            optuna.storages.RDBStorage(url)  # the other tuner, start to finish (stamps twice)
        insert(self, version)

    monkeypatch.setattr(HeadMaintainer, "_insert_version", the_other_tuner_stamps_after_this_look)
    storage = open_storage(url)
    assert len(stamps) == 2  # this one's failed stamp and the other's; the retry found it
    optuna.create_study(storage=storage, study_name="s")
    assert [s.study_name for s in optuna.get_all_study_summaries(storage)] == ["s"]


def test_an_sqlite_error_other_than_the_race_is_not_retried(tmp_path, monkeypatch):
    import sqlite3

    calls = []

    def locked(*args, **kwargs):
        calls.append(args[0])
        cause = sqlite3.OperationalError("disk I/O error")
        raise sqlalchemy.exc.OperationalError("CREATE TABLE studies", {}, cause)

    monkeypatch.setattr(optuna.storages, "RDBStorage", locked)
    with pytest.raises(StorageError, match="disk I/O error"):
        open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    assert len(calls) == 1


def test_a_sqlite_url_naming_a_python_file_says_it_is_not_a_database(tmp_path):
    from tfperf.study.storage import StorageError, open_storage

    pipeline = tmp_path / "pipeline.py"
    pipeline.write_text("def make_dataset(knobs):\n    return None\n", encoding="utf-8")
    before = pipeline.read_bytes()
    with pytest.raises(StorageError) as raised:
        open_storage(f"sqlite:///{pipeline}")
    message = str(raised.value)
    assert f"{str(pipeline)!r} is not an SQLite database" in message
    assert "sqlite:///studies/pipeline.db" in message
    assert "damaged" not in message
    assert pipeline.read_bytes() == before
