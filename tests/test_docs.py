"""The docs are for users and the code's comments state rules; calibration history lives apart.

User pages (`docs/*.md`, README.md) and the comments and docstrings in `tfperf/` say what a
rule is and why, never which commit or benchmark run calibrated it: that goes to one table,
`docs/notes/calibration.md`, the only place a commit hash may appear. `docs/limit.md` stays a
page a user reads through. Links between the pages resolve.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tfperf"
DOCS = ROOT / "docs"
NOTES = DOCS / "notes"
#: The pages users read: everything in docs/ but the engineers' notes, and the README.
USER_PAGES = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
LIMIT_PAGE_LINES = 200

#: A word of 7-40 hex digits with at least one digit and one letter a-f, as git abbreviates a
#: commit ("4bada1e"); an all-digit hash ("9342484") counts when "bench", "commit" or "clone"
#: leads it. Colours (`#1f77b4`), `0x` literals and hex inside a longer word are not hashes.
_HEX = r"(?<![#\w])(?<!0x)[0-9a-f]{7,40}(?!\w)"
_MIXED_HEX = re.compile(rf"{_HEX}")
_CITED_DIGITS = re.compile(r"\b(?:bench|commit|clone)\b[^.\n]{0,20}?\b(\d{7,40})\b")
#: A benchmark run cited by name ("in the bench at", "bench run", "make bench of").
_BENCH_RUN = re.compile(r"\b(?:the|a|one|this|last|next) bench(?:mark)? (?:at|of|run)\b", re.I)


def _hashes(text: str) -> list[str]:
    mixed = [
        m.group(0)
        for m in _MIXED_HEX.finditer(text)
        if re.search(r"[0-9]", m.group(0)) and re.search(r"[a-f]", m.group(0))
    ]
    return mixed + [m.group(1) for m in _CITED_DIGITS.finditer(text)]


def _citations(text: str) -> list[str]:
    return _hashes(text) + [m.group(0) for m in _BENCH_RUN.finditer(text)]


def _benchmark_pipelines() -> list[str]:
    """The benchmark pipelines by module name: `benchmarks/*.py` files that build a dataset."""
    return sorted(
        path.stem
        for path in (ROOT / "benchmarks").glob("*.py")
        if "def make_dataset" in path.read_text(encoding="utf-8")
    )


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    """Every comment and docstring of a Python file, with its first line number."""
    source = path.read_text(encoding="utf-8")
    found = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                found.append((node.body[0].lineno, docstring))
    return found


def _python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("text", ["fixed in 4bada1e", "the bench at 9342484", "a bench run"])
def test_a_citation_is_found(text: str) -> None:
    assert _citations(text)


@pytest.mark.parametrize(
    "text",
    [
        "colours like #1f77b4 and #d55e00",
        "a mask of 0xdeadbeef",
        "1,548 examples/s at 2,755 and 1234567 bytes",
        "make bench (or python -m benchmarks) measures seven pipelines",
        "the deadbeef sentinel",  # letters only: a word, not a hash
        "a name like cafe1234_suffix",  # hex inside a longer word
    ],
)
def test_legitimate_hex_and_words_are_not_citations(text: str) -> None:
    assert _citations(text) == []


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_pages_cite_no_commit_or_benchmark_run(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    found = [(n, c) for n, line in enumerate(lines, 1) for c in _citations(line)]
    assert not found, (
        f"{page.relative_to(ROOT)} cites commits or benchmark runs at (line, text) {found}: "
        "state the rule here and move the measurement to docs/notes/calibration.md"
    )


def test_code_comments_cite_no_commit_or_benchmark_run() -> None:
    pipelines = _benchmark_pipelines()
    assert pipelines, "no benchmark pipelines found in benchmarks/"
    named = re.compile(r"\b(?:" + "|".join(map(re.escape, pipelines)) + r")\b")
    found = [
        f"{path.relative_to(ROOT)}:{line}: {hit}"
        for path in _python_files()
        for line, text in _comments_and_docstrings(path)
        for hit in _citations(text) + named.findall(text)
    ]
    assert not found, (
        "comments and docstrings in tfperf/ cite commits, benchmark runs or benchmark "
        f"pipelines: {found}. A comment states the rule and its reason; the measurement that "
        "calibrated it goes to docs/notes/calibration.md"
    )


def test_limit_page_reads_in_under_200_lines() -> None:
    lines = len((DOCS / "limit.md").read_text(encoding="utf-8").splitlines())
    assert lines < LIMIT_PAGE_LINES, (
        f"docs/limit.md has {lines} lines, `< {LIMIT_PAGE_LINES}` must hold: keep it a user's "
        "page and put calibration history in docs/notes/calibration.md"
    )


def test_calibration_notes_exist() -> None:
    text = (NOTES / "calibration.md").read_text(encoding="utf-8")
    assert "| rule / constant |" in text


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize(
    "page",
    [*USER_PAGES, *sorted(NOTES.glob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = [
        target
        for target in _LINK.findall(text)
        if "://" not in target
        and not target.startswith("mailto:")
        and not (page.parent / target).exists()
    ]
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"
