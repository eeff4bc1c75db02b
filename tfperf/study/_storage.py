"""Where `tfperf tune` keeps its Optuna studies, and opening that storage with clear errors.

A study lives in an SQLite file by default (`studies/<pipeline>.db`), so an interrupted search
resumes where it stopped. PostgreSQL and MySQL serve several machines tuning at once; a journal
file serves shared file systems (NFS) where SQLite's locking is unreliable. Every message this
module writes shows the URL with its password masked. Optuna and SQLAlchemy are imported only
when a storage is opened.

Example:
    >>> mask_url("postgresql://tuner:hunter2@db.example.com/studies")
    'postgresql://tuner:***@db.example.com/studies'
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
from urllib.parse import unquote

from tfperf.errors import TfperfError

if TYPE_CHECKING:
    import sqlite3

    import optuna
    from sqlalchemy.engine import URL

__all__ = [
    "StorageError",
    "default_storage_url",
    "explain_storage_failure",
    "mask_url",
    "open_storage",
    "study_name_for",
]

logger = logging.getLogger(__name__)

_MASK = "***"
_JOURNAL_PREFIX = "journal://"
_QUERY_PASSWORD = re.compile(r"([?&](?:password|passwd|pwd)=)([^&#]*)", re.IGNORECASE)
_RDB_BACKENDS = ("sqlite", "postgresql", "mysql")
#: Seconds a writer waits for SQLite's lock before failing: parallel workers share one file.
SQLITE_LOCK_TIMEOUT_S = 60
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
# SQLAlchemy driver name -> the pip package that provides it.
_DRIVER_PACKAGES = {
    "psycopg2": "psycopg2-binary",
    "psycopg": '"psycopg[binary]"',  # quoted: zsh would expand the brackets
    "pg8000": "pg8000",
    "pymysql": "PyMySQL",
    "mysqldb": "mysqlclient",
    "mysqlconnector": "mysql-connector-python",
    "mariadbconnector": "mariadb",
}
_ACCEPTED = (
    "sqlite:///relative/path.db or sqlite:////absolute/path.db (a file; the default), "
    "postgresql+psycopg2://user:password@host:5432/dbname (pip install psycopg2-binary), "
    "mysql+pymysql://user:password@host:3306/dbname (pip install PyMySQL), "
    "journal:///absolute/path.log or journal://relative/path.log (a journal file, for shared "
    "file systems where SQLite locking fails)"
)
# Phrases of driver messages (PostgreSQL, MySQL, SQLite), lower-cased, by what they mean.
_AUTH_PHRASES = (
    "password authentication failed",
    "authentication failed",
    "access denied",
    "no password supplied",
    "pg_hba.conf",
)
_UNKNOWN_DB_PHRASES = ("unknown database", "(1049")
_UNREACHABLE_PHRASES = (
    "connection refused",
    "could not connect",
    "can't connect",
    "could not translate host name",
    "name or service not known",
    "nodename nor servname",
    "no route to host",
    "network is unreachable",
    "timeout expired",
    "timed out",
    "(2003",
    "(2005",
)


class StorageError(TfperfError):
    """A study storage URL cannot be used: wrong form, missing driver, unreachable, refused."""


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


def mask_url(url: str) -> str:
    """`url` with any password replaced by `***`, safe to show in messages and logs.

    Masks the password of `scheme://user:password@host/...` (also when the password holds an
    unescaped `@`, `/` or `?`: everything up to the last `@` is then masked) and query
    parameters named `password`, `passwd` or `pwd`. Strings that are not URLs come back
    unchanged.

    Example:
        >>> mask_url("mysql+pymysql://me:p@ss@db:3306/tfperf")
        'mysql+pymysql://me:***@db:3306/tfperf'
    """
    masked = _QUERY_PASSWORD.sub(rf"\g<1>{_MASK}", url)
    scheme, separator, rest = masked.partition("://")
    if not separator or "@" not in rest:
        return masked
    userinfo, _, hostpart = rest.rpartition("@")
    if userinfo.count("@") == 0:  # one "@": SQLAlchemy parses the URL as the driver will
        parsed = _parse(masked)
        if parsed is not None and parsed.password is not None:
            return parsed.render_as_string(hide_password=True)
    user, has_password, _ = userinfo.partition(":")
    if not has_password:
        return masked
    return f"{scheme}://{user}:{_MASK}@{hostpart}"


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
    if url.startswith(_JOURNAL_PREFIX):
        return _open_journal(url)
    parsed = _parse(url)
    if parsed is None or parsed.get_backend_name() not in _RDB_BACKENDS:
        raise StorageError(_unknown_form_message(url, parsed))
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
        return _rdb_storage(connect, target, heartbeat_interval, grace_period, read_only and sqlite)
    except ImportError as error:
        raise StorageError(_missing_driver_message(url, parsed, error)) from None
    except sqlalchemy.exc.NoSuchModuleError:
        raise StorageError(
            f"Storage {mask_url(url)}: SQLAlchemy knows no driver "
            f"{parsed.drivername!r}. Accepted forms: {_ACCEPTED}."
        ) from None
    except (sqlalchemy.exc.SQLAlchemyError, RuntimeError) as error:
        # `from None`: the original's traceback may quote connection parameters.
        raise StorageError(_database_message(url, parsed, error)) from None


def _rdb_storage(
    url: str,
    parsed: URL,
    heartbeat_interval: int | None,
    grace_period: int | None,
    read_only: bool = False,
) -> optuna.storages.RDBStorage:
    """`RDBStorage(url)`, retried while another tuner creates Optuna's tables at that moment."""
    import optuna
    import sqlalchemy.exc

    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        try:
            return optuna.storages.RDBStorage(
                url,
                engine_kwargs=_engine_kwargs(parsed, read_only),
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
    detail = _driver_detail(error).lower()
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

    path = url[len(_JOURNAL_PREFIX) :]
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
            raise StorageError(_damaged_or_full(shown, path, "disk is full")) from None
        raise StorageError(
            f"Storage {shown}: cannot use {path!r} as an Optuna journal "
            f"({type(error).__name__}: {error}). Is it another kind of file?"
        ) from None
    except ValueError as error:
        raise StorageError(
            f"Storage {shown}: cannot use {path!r} as an Optuna journal "
            f"({type(error).__name__}: {error}). Is it another kind of file?"
        ) from None


def _missing_driver_message(url: str, parsed: URL, error: ImportError) -> str:
    cause = error.__cause__ if isinstance(error.__cause__, ImportError) else error
    driver = parsed.get_driver_name()
    module = cause.name or driver
    package = _DRIVER_PACKAGES.get(driver) or _DRIVER_PACKAGES.get(module.lower(), module)
    message = (
        f"Storage {mask_url(url)}: the {parsed.get_backend_name()} driver {module!r} is not "
        f"installed. Install it with: pip install {package}"
    )
    if (
        "+" not in parsed.drivername
        and driver != "psycopg2"
        and parsed.get_backend_name() == ("postgresql")
    ):
        # SQLAlchemy 2.1 made psycopg 3 the default; many setups still have psycopg2.
        message += (
            f" (or, to use psycopg2, write {parsed.drivername}+psycopg2:// and "
            "pip install psycopg2-binary)"
        )
    return message


def _database_message(url: str, parsed: URL, error: Exception) -> str:
    detail = _scrub(_driver_detail(error), url)
    lowered = detail.lower()
    shown = mask_url(url)
    server = f"{parsed.host or 'localhost'}{f':{parsed.port}' if parsed.port else ''}"
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_message(shown, parsed, detail)
    if any(phrase in lowered for phrase in _AUTH_PHRASES):
        return (
            f"Storage {shown}: authentication failed for user {parsed.username!r} at {server} "
            f"({detail}). Check the user name and password in the URL."
        )
    if any(phrase in lowered for phrase in _UNKNOWN_DB_PHRASES) or (
        "database" in lowered and "does not exist" in lowered
    ):
        return (
            f"Storage {shown}: the server at {server} has no database {parsed.database!r} "
            f"({detail}). Create it first (CREATE DATABASE {parsed.database};)."
        )
    if any(phrase in lowered for phrase in _UNREACHABLE_PHRASES):
        return (
            f"Storage {shown}: cannot reach the database server at {server} ({detail}). "
            "Is the server running, and are the host and port right?"
        )
    kind = type(getattr(error, "orig", None) or error).__name__
    return f"Storage {shown}: cannot open the study storage ({kind}: {detail})."


def _sqlite_message(shown: str, parsed: URL, detail: str) -> str:
    lowered = detail.lower()
    if "not a database" in lowered:
        return (
            f"Storage {shown}: {parsed.database!r} is not an SQLite database ({detail}). "
            "Point the URL at a new file or at a study file tfperf wrote."
        )
    if "malformed" in lowered or "disk is full" in lowered:
        return _damaged_or_full(shown, str(parsed.database), detail)
    if "locked" in lowered:
        return (
            f"Storage {shown}: the SQLite file stayed locked for {SQLITE_LOCK_TIMEOUT_S} s "
            f"({detail}). On a network file system, use journal:///path/study.log instead."
        )
    if "unable to open" in lowered:
        return (
            f"Storage {shown}: SQLite cannot open {parsed.database!r} ({detail}). Does its "
            "folder exist, and may this user write there?"
        )
    return f"Storage {shown}: cannot open the study storage ({detail})."


def _driver_detail(error: Exception) -> str:
    """The driver's own message, without SQLAlchemy's wrapper and documentation link."""
    original = getattr(error, "orig", None)
    text = str(original if original is not None else error)
    return " ".join(text.split())


def _scrub(text: str, url: str) -> str:
    """`text` with every form of the URL's password replaced by `***`."""
    for secret in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(secret, _MASK)
    return text.replace(url, mask_url(url))


def _secrets(url: str) -> set[str]:
    found = {match.group(2) for match in _QUERY_PASSWORD.finditer(url)}
    _, separator, rest = url.partition("://")
    if separator and "@" in rest:
        userinfo = rest.rpartition("@")[0]
        found.add(userinfo.partition(":")[2])
    parsed = _parse(url)
    if parsed is not None and parsed.password is not None:
        found.add(str(parsed.password))
    found |= {unquote(secret) for secret in found}
    return {secret for secret in found if secret}


def _parse(url: str) -> URL | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url)
    except (ArgumentError, ValueError):
        return None


def _unknown_form_message(url: str, parsed: URL | None) -> str:
    shown = mask_url(url)
    hint = ""
    if parsed is not None and parsed.drivername.split("+")[0] == "postgres":
        hint = " SQLAlchemy spells the scheme postgresql://, not postgres://."
    elif "://" not in url and url.endswith((".db", ".sqlite", ".sqlite3")):
        hint = f" Did you mean sqlite:///{url}?"
    elif "://" not in url and url.endswith((".log", ".jsonl", ".journal")):
        hint = f" Did you mean journal://{url}?"
    elif url.partition("://")[2].count("@") > 1:
        hint = " Percent-encode an '@' in the user name or password as %40."
    return f"Storage URL {shown!r} is not a form tfperf can open.{hint} Accepted: {_ACCEPTED}."


def explain_storage_failure(url: str, error: BaseException) -> StorageError | None:
    """A message for a storage failure in the middle of a study; None if `error` is not one.

    The study's data survives these (SQLite and the journal write atomically), so the message
    says what the user can do: free space, or recover a damaged file.

    Example:
        >>> import sqlite3
        >>> str(explain_storage_failure("sqlite:////s/x.db", sqlite3.OperationalError(
        ...     "database or disk is full")))[:40]
        'the disk holding /s/x.db is full (SQLite'
    """
    # Optuna wraps the driver's error (StorageInternalError); the cause says what happened.
    for cause in _causes(error):
        explained = _explain_one(url, cause)
        if explained is not None:
            return explained
    return None


def _causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _explain_one(url: str, error: BaseException) -> StorageError | None:
    shown = mask_url(url)
    where = storage_file(url) or shown
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageError(_damaged_or_full(shown, where, f"{error.strerror}"))
    if isinstance(error, OSError) and error.errno == errno.EROFS:
        return StorageError(
            f"{where} is on a file system that became read-only ({error.strerror}); finished "
            "trials are kept. Make it writable, or copy the study elsewhere and pass --storage."
        )
    detail = _driver_detail(error) if isinstance(error, Exception) else str(error)
    lowered = detail.lower()
    if not _is_database_error(error):
        return None
    if "could not decode to utf-8" in lowered:
        # A damaged page inside a stored value; the driver quotes the value, which can be long.
        return StorageError(_damaged_or_full(shown, where, "a stored value is not valid UTF-8"))
    if "disk is full" in lowered or "malformed" in lowered or "not a database" in lowered:
        return StorageError(_damaged_or_full(shown, where, _scrub(detail, url)))
    if "readonly" in lowered or "read-only" in lowered:
        return StorageError(
            f"{where} became read-only ({_scrub(detail, url)}); finished trials are kept. Make "
            "it writable, or copy the study elsewhere and pass --storage."
        )
    return None


def _is_database_error(error: BaseException) -> bool:
    import sqlite3

    try:
        import sqlalchemy.exc
    except ImportError:  # pragma: no cover - sqlalchemy is a dependency
        return isinstance(error, sqlite3.Error)
    return isinstance(error, (sqlite3.Error, sqlalchemy.exc.DBAPIError))


def storage_file(url: str) -> str | None:
    """The file a SQLite or journal storage URL keeps the study in; None for a database server."""
    if url.startswith(_JOURNAL_PREFIX):
        return url[len(_JOURNAL_PREFIX) :] or None
    parsed = _parse(url)
    if parsed is not None and parsed.get_backend_name() == "sqlite" and parsed.database:
        return str(parsed.database)
    return None


def _damaged_or_full(shown: str, where: str, detail: str) -> str:
    if "full" in detail.lower() or "no space" in detail.lower():
        return (
            f"the disk holding {where} is full ({detail}); the finished trials are kept. Free "
            f"space there and run the same command again to resume (storage {shown})."
        )
    recover = (
        f"`sqlite3 {where} .recover | sqlite3 recovered.db` saves what can be read"
        if not shown.startswith(_JOURNAL_PREFIX)
        else "delete its last, incomplete line to keep the trials before it"
    )
    return (
        f"{where} is damaged (SQLite: {detail}); {recover}, or start a new study with --study "
        "and another --storage."
    )
