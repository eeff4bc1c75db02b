"""Why a study's storage cannot be used, in words: the URL with its password masked, what a
driver or database said, and failures in the middle of a study with what the user can do.

Example:
    >>> mask_url("postgresql://tuner:hunter2@db.example.com/studies")
    'postgresql://tuner:***@db.example.com/studies'
"""

from __future__ import annotations

import errno
import re
from typing import TYPE_CHECKING
from urllib.parse import unquote

from tfperf.errors import TfperfError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

_MASK = "***"
JOURNAL_PREFIX = "journal://"
_QUERY_PASSWORD = re.compile(r"([?&](?:password|passwd|pwd)=)([^&#]*)", re.IGNORECASE)
#: Seconds a writer waits for SQLite's lock before failing: parallel workers share one file.
SQLITE_LOCK_TIMEOUT_S = 60
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
ACCEPTED = (
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
        parsed = parse_url(masked)
        if parsed is not None and parsed.password is not None:
            return parsed.render_as_string(hide_password=True)
    user, has_password, _ = userinfo.partition(":")
    if not has_password:
        return masked
    return f"{scheme}://{user}:{_MASK}@{hostpart}"


def missing_driver_message(url: str, parsed: URL, error: ImportError) -> str:
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


def database_message(url: str, parsed: URL, error: Exception) -> str:
    detail = _scrub(driver_detail(error), url)
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
        return damaged_or_full(shown, str(parsed.database), detail)
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


def driver_detail(error: Exception) -> str:
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
    parsed = parse_url(url)
    if parsed is not None and parsed.password is not None:
        found.add(str(parsed.password))
    found |= {unquote(secret) for secret in found}
    return {secret for secret in found if secret}


def parse_url(url: str) -> URL | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url)
    except (ArgumentError, ValueError):
        return None


def unknown_form_message(url: str, parsed: URL | None) -> str:
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
    return f"Storage URL {shown!r} is not a form tfperf can open.{hint} Accepted: {ACCEPTED}."


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
        return StorageError(damaged_or_full(shown, where, f"{error.strerror}"))
    if isinstance(error, OSError) and error.errno == errno.EROFS:
        return StorageError(
            f"{where} is on a file system that became read-only ({error.strerror}); finished "
            "trials are kept. Make it writable, or copy the study elsewhere and pass --storage."
        )
    detail = driver_detail(error) if isinstance(error, Exception) else str(error)
    lowered = detail.lower()
    if not _is_database_error(error):
        return None
    if "could not decode to utf-8" in lowered:
        # A damaged page inside a stored value; the driver quotes the value, which can be long.
        return StorageError(damaged_or_full(shown, where, "a stored value is not valid UTF-8"))
    if "disk is full" in lowered or "malformed" in lowered or "not a database" in lowered:
        return StorageError(damaged_or_full(shown, where, _scrub(detail, url)))
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
    if url.startswith(JOURNAL_PREFIX):
        return url[len(JOURNAL_PREFIX) :] or None
    parsed = parse_url(url)
    if parsed is not None and parsed.get_backend_name() == "sqlite" and parsed.database:
        return str(parsed.database)
    return None


def damaged_or_full(shown: str, where: str, detail: str) -> str:
    if "full" in detail.lower() or "no space" in detail.lower():
        return (
            f"the disk holding {where} is full ({detail}); the finished trials are kept. Free "
            f"space there and run the same command again to resume (storage {shown})."
        )
    recover = (
        f"`sqlite3 {where} .recover | sqlite3 recovered.db` saves what can be read"
        if not shown.startswith(JOURNAL_PREFIX)
        else "delete its last, incomplete line to keep the trials before it"
    )
    return (
        f"{where} is damaged (SQLite: {detail}); {recover}, or start a new study with --study "
        "and another --storage."
    )
