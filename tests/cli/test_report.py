"""`tfperf report`: from a saved profile or a stored study, without TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.deadlines import HANG_S
from tests.reports import fake_profile, make_study
from tfperf.cli.main import main

# Makes `import tensorflow` fail in the child, as on a laptop without it.
NO_TF = "import sys; sys.modules['tensorflow'] = None; from tfperf.cli.main import main; "


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_report_from_profile_json(capsys, tmp_path):
    saved = fake_profile().save(tmp_path / "demo-profile.json")
    status, out, err = run(capsys, "report", str(saved), "--html", str(tmp_path / "r.html"))
    assert status == 0, err
    assert out.strip() == f"HTML report: {tmp_path / 'r.html'}"
    assert "tfperf profile: demo.py" in (tmp_path / "r.html").read_text()


def test_report_default_path_is_under_reports(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    saved = fake_profile().save(tmp_path / "x.json")
    assert run(capsys, "report", str(saved))[0] == 0
    assert (tmp_path / "reports" / "demo-profile.html").exists()


def test_report_from_study_without_tensorflow(tmp_path):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    make_study(storage=url, name="demo", best_result=fake_profile())
    code = NO_TF + f"sys.exit(main(['report', '--storage', {url!r}, '--study', 'demo']))"
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=HANG_S,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "HTML report: reports/demo.html"
    assert "Use trial 2" in (tmp_path / "reports" / "demo.html").read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "give either a profile RESULT.json or --storage URL"),
        (("x.json", "--storage", "sqlite:///x.db"), "give either a profile RESULT.json"),
        (("missing.json",), "cannot read result file missing.json"),
        (("--storage", "sqlite:///absent.db"), "no study storage at absent.db"),
    ],
)
def test_bad_input_exits_2_with_one_message(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    status, _, err = run(capsys, "report", *argv)
    assert status == 2
    assert message in err
    assert "Traceback" not in err


def test_a_tune_summary_points_at_its_study(capsys, tmp_path):
    summary = tmp_path / "p-tune.json"
    summary.write_text('{"study_name": "p", "storage": "sqlite:///studies/p.db"}')
    status, _, err = run(capsys, "report", str(summary))
    assert status == 2
    assert "tfperf report --storage sqlite:///studies/p.db --study p" in err


def test_a_json_tfperf_did_not_write_is_named_not_a_result(capsys, tmp_path):
    foreign = tmp_path / "package.json"
    foreign.write_text('{"name": "web", "version": "1.0.0"}', encoding="utf-8")
    status, _, err = run(capsys, "report", str(foreign))
    assert status == 2
    assert f"{foreign} is not a tfperf result" in err
    assert "schema_version None" not in err


def _damage_one_page(database, page: int) -> None:
    with database.open("r+b") as stream:
        stream.seek(page * 4096)
        stream.write(b"\xff" * 4096)


@pytest.mark.parametrize("page", [1, 11, 28])  # studies, trial_user_attributes, a value's overflow
def test_a_study_with_one_damaged_page_is_named_and_left_byte_identical(capsys, tmp_path, page):
    database = tmp_path / "demo.db"
    make_study(storage=f"sqlite:///{database}", name="demo", best_result=fake_profile())
    _damage_one_page(database, page)
    before = database.read_bytes()
    url = f"sqlite:///{database}"
    status, _, err = run(capsys, "report", "--storage", url, "--study", "demo")
    assert status == 2, err
    assert f"{database} is damaged (SQLite: " in err
    assert "internal error" not in err
    assert database.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.db"]  # no journal left beside


def test_a_report_writes_nothing_to_the_study_it_reads(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    database = tmp_path / "demo.db"
    make_study(storage=f"sqlite:///{database}", name="demo", best_result=fake_profile())
    database.chmod(0o444)  # a read-only copy, as on a shared results folder
    before = database.read_bytes()
    status, _, err = run(capsys, "report", "--storage", f"sqlite:///{database}")
    assert status == 0, err
    assert database.read_bytes() == before
