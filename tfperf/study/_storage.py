"""Where `tfperf tune` keeps its Optuna studies, and opening that storage with clear errors.

A study lives in an SQLite file by default (`studies/<pipeline>.db`), so an interrupted search
resumes where it stopped. PostgreSQL and MySQL serve several machines tuning at once; a journal
file serves shared file systems (NFS) where SQLite's locking is unreliable. Every message shows
the URL with its password masked (`_storage_errors`). Optuna and SQLAlchemy are imported only
when a storage is opened.
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import os
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.study._storage_errors import (
    ACCEPTED,
    JOURNAL_PREFIX,
    SQLITE_LOCK_TIMEOUT_S,
    StorageError,
    damaged_or_full,
    database_message,
    driver_detail,
    mask_url,
    missing_driver_message,
    parse_url,
    unknown_form_message,
)

if TYPE_CHECKING:
    import sqlite3

    import optuna
    from sqlalchemy.engine import URL

logger = logging.getLogger(__name__)

_RDB_BACKENDS = ("sqlite", "postgresql", "mysql")
#: Seconds a PostgreSQL connection attempt may take, so an unreachable host fails in time.
CONNECT_TIMEOUT_S = 10
#: Attempts at opening a database whose tables another tuner may be creating at that moment.
SCHEMA_ATTEMPTS = 6
# A URL without a driver gets SQLAlchemy's default driver; when that one is missing and an
# alternative is installed, tfperf uses the alternative: scheme -> (default, alternatives).
_DEFAULT_DRIVERS = {
    "postgresql": ("psycopg", ("psycopg2", "pg8000")),
    "mysql": ("MySQLdb", ("pymysql", "mysql.connector")),
}
_DIALECT_DRIVERS = {
    "psycopg2": "psycopg2",
    "pg8000": "pg8000",
    "pymysql": "pymysql",
    "mysql.connector": "mysqlconnector",
}
# Races when several processes create Optuna's tables at once: the catalog's (PostgreSQL, MySQL,
# SQLite's "table ... already exists") and the version rows' (alembic_version, version_info),
# which each process inserts after finding none: SQLite's "UNIQUE constraint failed",
# PostgreSQL's "duplicate key", MySQL's "Duplicate entry".
_SCHEMA_RACE_PHRASES = (
    "already exists",
    "duplicate key",
    "duplicate entry",
    "unique constraint failed",
    "pg_type_typname_nsp_index",
)


def default_storage_url(pipeline_path: Path, studies_dir: Path = Path("studies")) -> str:
    """`sqlite:///<absolute studies_dir>/<pipeline stem>.db`, creating `studies_dir`.

    A relative `studies_dir` is taken from the working directory, like `reports/` for
    `tfperf profile`, and written absolute, so the URL means the same file from anywhere.

    Example:
        >>> default_storage_url(Path("examples/pipeline.py"), Path("/tmp/studies"))
        'sqlite:////tmp/studies/pipeline.db'
    """
    from sqlalchemy.engine import URL

    folder = studies_dir.expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    database = (folder / f"{study_name_for(pipeline_path)}.db").as_posix()
    # URL.create escapes the characters (`?`, `%`, `#`) a path may hold but a URL may not.
    return URL.create("sqlite", database=database).render_as_string()


def study_name_for(pipeline_path: Path) -> str:
    """The study name for a pipeline file: its stem, e.g. "pipeline" for "cv/pipeline.py"."""
    return pipeline_path.stem


def open_storage(
    url: str,
    *,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    read_only: bool = False,
) -> optuna.storages.BaseStorage:
    """Opens (creating if needed) the Optuna storage at `url`.

    Accepted forms: `sqlite:///path.db`, `postgresql://...`, `mysql+driver://...` (through
    `optuna.storages.RDBStorage`), and `journal:///absolute/path` or `journal://relative/path`
    (through `JournalStorage` on a `JournalFileBackend`). SQLite writers wait up to 60 s for
    the file's lock, so parallel workers do not fail at once. A URL that names no driver
    (`postgresql://`, `mysql://`) uses SQLAlchemy's default driver, or an installed
    alternative when the default is missing (psycopg2 or pg8000; PyMySQL or
    mysql-connector). Several tuners may open a new database at the same moment: opening is
    retried while another one creates Optuna's tables.

    Args:
        url: The storage URL.
        heartbeat_interval: Seconds between a running trial's heartbeats in a database
            storage; a trial silent for `grace_period` seconds (default: twice the interval)
            counts as stale (see `tfperf.study._cluster`). Journal storages have no heartbeat table:
            `tfperf.study._cluster` keeps their heartbeats in the trials themselves.
        grace_period: See `heartbeat_interval`.
        read_only: open a SQLite file so that nothing can be written to it (a reader of a
            study, `tfperf report`, must leave the file as it found it, damaged or not);
            other storages open as usual.

    Raises:
        StorageError: the URL has no accepted form, its driver is missing, the server is
            unreachable or refuses the login, or the SQLite or journal file cannot be written.
            The message shows the URL with the password masked.
    """
    for name, value in (("heartbeat_interval", heartbeat_interval), ("grace_period", grace_period)):
        if value is not None and (isinstance(value, bool) or value <= 0):
            raise StorageError(f"`{name} > 0` must hold, but got {name}={value!r}.")
    if url.startswith(JOURNAL_PREFIX):
        return _open_journal(url)
    parsed = parse_url(url)
    if parsed is None or parsed.get_backend_name() not in _RDB_BACKENDS:
        raise StorageError(unknown_form_message(url, parsed))
    if parsed.get_backend_name() != "sqlite" and "@" in f"{parsed.host}{parsed.database}":
        # SQLAlchemy ends the password at the first "@", so the rest of it would become the
        # host name and show up in the server's error messages.
        raise StorageError(
            f"Storage {mask_url(url)}: the URL holds more than one '@' before the database "
            "name. Percent-encode an '@' in the user name or password as %40."
        )
    return _open_rdb(url, parsed, heartbeat_interval, grace_period, read_only)


def _open_rdb(
    url: str,
    parsed: URL,
    heartbeat_interval: int | None,
    grace_period: int | None,
    read_only: bool = False,
) -> optuna.storages.BaseStorage:
    import sqlalchemy.exc

    sqlite = parsed.get_backend_name() == "sqlite"
    if sqlite:
        _check_sqlite_file(url, parsed, read_only)
    target = _with_installed_driver(parsed)
    connect = url if target is parsed else target.render_as_string(hide_password=False)
    try:
        engine = _engine_kwargs(target, read_only and sqlite)
        return _rdb_storage(connect, engine, heartbeat_interval, grace_period)
    except ImportError as error:
        raise StorageError(missing_driver_message(url, parsed, error)) from None
    except sqlalchemy.exc.NoSuchModuleError:
        raise StorageError(
            f"Storage {mask_url(url)}: SQLAlchemy knows no driver "
            f"{parsed.drivername!r}. Accepted forms: {ACCEPTED}."
        ) from None
    except (sqlalchemy.exc.SQLAlchemyError, RuntimeError) as error:
        # `from None`: the original's traceback may quote connection parameters.
        raise StorageError(database_message(url, parsed, error)) from None


def _rdb_storage(
    url: str, engine: dict[str, Any], heartbeat_interval: int | None, grace_period: int | None
) -> optuna.storages.RDBStorage:
    """`RDBStorage(url)`, retried while another tuner creates Optuna's tables at that moment."""
    import optuna
    import sqlalchemy.exc

    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        try:
            return optuna.storages.RDBStorage(
                url,
                engine_kwargs=engine,
                heartbeat_interval=heartbeat_interval,
                grace_period=grace_period,
            )
        except (
            sqlalchemy.exc.IntegrityError,
            sqlalchemy.exc.ProgrammingError,
            sqlalchemy.exc.OperationalError,
        ) as error:
            # Creating the schema is not safe against a concurrent twin: PostgreSQL's (and
            # MySQL's) loser fails on the catalog, SQLite's on "table ... already exists" when
            # the other created it between the check and the create, and either on the
            # version row the other stamped between its look and its insert; each finds the
            # schema made when it looks again.
            if attempt == SCHEMA_ATTEMPTS or not _schema_race(error):
                raise
            time.sleep(random.uniform(0.2, 1.0))
    raise AssertionError("unreachable: the last attempt returns or raises")


def _with_installed_driver(parsed: URL) -> URL:
    """`parsed`, naming an installed driver when it names none and the default is missing."""
    defaults = _DEFAULT_DRIVERS.get(parsed.drivername)
    if defaults is None:
        return parsed
    default, alternatives = defaults
    if _installed(default):
        return parsed
    for module in alternatives:
        if _installed(module):
            driver = f"{parsed.drivername}+{_DIALECT_DRIVERS[module]}"
            logger.info("Storage driver %s is missing; using %s instead.", default, driver)
            return parsed.set(drivername=driver)
    return parsed


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing, or a stub in sys.modules
        return False


def _schema_race(error: Exception) -> bool:
    detail = driver_detail(error).lower()
    return any(phrase in detail for phrase in _SCHEMA_RACE_PHRASES)


def _engine_kwargs(parsed: URL, read_only: bool = False) -> dict[str, Any]:
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if read_only and database and database != ":memory:" and not database.startswith("file:"):
            return {"creator": _read_only_sqlite(database)}
        return {"connect_args": {"timeout": SQLITE_LOCK_TIMEOUT_S}}
    timeout_set = "connect_timeout" in parsed.query
    if parsed.get_driver_name() in ("psycopg2", "psycopg") and not timeout_set:
        return {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
    return {}


def _read_only_sqlite(database: str) -> Callable[[], sqlite3.Connection]:
    """Connects to `database` in SQLite's read-only mode: any write fails instead of landing,
    and no journal file is created beside it."""
    import sqlite3
    from urllib.parse import quote

    uri = f"file:{quote(str(Path(database).resolve()))}?mode=ro"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(
            uri, uri=True, timeout=SQLITE_LOCK_TIMEOUT_S, check_same_thread=False
        )

    return connect


def _check_sqlite_file(url: str, parsed: URL, read_only: bool = False) -> None:
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    folder = path.parent
    shown = mask_url(url)
    if not folder.is_dir():
        raise StorageError(
            f"Storage {shown}: the folder {str(folder)!r} for the SQLite file does not exist. "
            f"Create it (mkdir -p {folder}) or point the URL elsewhere; note that "
            "sqlite:///x.db is relative to the working directory and sqlite:////x.db absolute."
        )
    _require_sqlite_header(path, shown)
    if read_only:
        return
    # SQLite writes a journal file beside the database, so the folder must be writable too.
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        target = folder if not os.access(folder, os.W_OK) else path
        raise StorageError(
            f"Storage {shown}: {str(target)!r} is not writable by this user, and SQLite must "
            "write the study file and its journal there. Choose a folder you own, e.g. "
            "sqlite:///studies/NAME.db (relative to the working directory)."
        )


#: The first bytes of every SQLite 3 database file (an empty file becomes one when opened).
_SQLITE_HEADER = b"SQLite format 3\x00"


def _require_sqlite_header(path: Path, shown: str) -> None:
    """Refuses an existing file that is not a SQLite database before SQLite calls it damaged.

    Reports a SQLite URL that names a pipeline file or a JSON result as what it is, so
    the fix (point the URL at a `.db` file) is the one suggested, not a recovery.
    """
    try:
        with path.open("rb") as file:
            head = file.read(len(_SQLITE_HEADER))
    except OSError:  # missing or unreadable: SQLite creates it, or the next check says why
        return
    if not head or head == _SQLITE_HEADER:
        return
    raise StorageError(
        f"Storage {shown}: {str(path)!r} is not an SQLite database (it does not start with "
        "SQLite's header); a sqlite:/// URL names the study's database file, not the "
        f"pipeline or another file. Point it at a .db file, e.g. sqlite:///studies/"
        f"{path.stem}.db (created if missing)."
    )


def _open_journal(url: str) -> optuna.storages.BaseStorage:
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    path = url[len(JOURNAL_PREFIX) :]
    if re.match(r"^/[A-Za-z]:[/\\]", path):  # journal:///C:/studies/x.log on Windows
        path = path[1:]
    shown = mask_url(url)
    if not path or path.endswith(("/", "\\")):
        raise StorageError(
            f"Storage {shown} names no file. Write journal:///absolute/path/study.log or "
            "journal://relative/path/study.log."
        )
    folder = Path(path).parent
    if not folder.is_dir():
        raise StorageError(
            f"Storage {shown}: the folder {str(folder)!r} for the journal file does not exist. "
            f"Create it (mkdir -p {folder}) or point the URL elsewhere."
        )
    # Symlink locks fail where the file system has no symlinks (Windows without privileges).
    lock = JournalFileOpenLock(path) if os.name == "nt" else None
    try:
        return JournalStorage(JournalFileBackend(path, lock_obj=lock))
    except PermissionError:
        raise StorageError(
            f"Storage {shown}: {path!r} is not writable by this user. Choose a folder you own."
        ) from None
    except OSError as error:
        if error.errno == errno.EROFS:
            raise StorageError(
                f"Storage {shown}: {path!r} is on a read-only file system, and the journal must "
                "be written. Point the URL at a writable folder."
            ) from None
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StorageError(damaged_or_full(shown, path, "disk is full")) from None
        raise StorageError(
            f"Storage {shown}: cannot use {path!r} as an Optuna journal "
            f"({type(error).__name__}: {error}). Is it another kind of file?"
        ) from None
    except ValueError as error:
        raise StorageError(
            f"Storage {shown}: cannot use {path!r} as an Optuna journal "
            f"({type(error).__name__}: {error}). Is it another kind of file?"
        ) from None
