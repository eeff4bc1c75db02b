"""`tfperf report`: from a saved profile or a stored study, without TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
        timeout=120,
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
