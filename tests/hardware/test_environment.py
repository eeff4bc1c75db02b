from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from tfperf import hardware as environment
from tfperf.hardware import collect_environment, cpu_model, tensorflow_version

REPO = Path(__file__).resolve().parents[2]


def test_collect_environment_describes_this_machine():
    env = collect_environment(["Tesla T4"])
    assert env.tfperf_version == (environment.package_version("tfperf") or "unknown")
    assert env.python_version == platform.python_version()
    assert env.platform == platform.platform()
    assert env.hostname == socket.gethostname()
    assert env.cpu_count == (os.cpu_count() or 1)
    assert env.cpu_model
    assert env.gpu_names == ["Tesla T4"]


def test_gpu_names_are_copied():
    names = ["A"]
    env = collect_environment(names)
    names.append("B")
    assert env.gpu_names == ["A"]


def test_tensorflow_version_is_read_without_importing_tensorflow():
    code = (
        "import sys\n"
        "from tfperf.hardware import collect_environment\n"
        "before = 'tensorflow' in sys.modules\n"
        "collect_environment([])\n"
        "print(before, 'tensorflow' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "False"]


def _installed(monkeypatch, versions: dict[str, str]) -> None:
    def version(name: str) -> str:
        if name not in versions:
            raise metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(environment.metadata, "version", version)


def test_tensorflow_version_from_tensorflow_cpu(monkeypatch):
    _installed(monkeypatch, {"tensorflow-cpu": "2.21.0"})
    assert tensorflow_version() == "2.21.0"


def test_tensorflow_version_prefers_tensorflow(monkeypatch):
    _installed(monkeypatch, {"tensorflow": "2.21.0", "tensorflow-cpu": "2.1.0"})
    assert tensorflow_version() == "2.21.0"


def test_missing_tensorflow_and_tfperf(monkeypatch):
    _installed(monkeypatch, {})
    env = collect_environment([])
    assert env.tensorflow_version is None
    assert env.tfperf_version == "unknown"


def test_cpu_model_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: X\nmodel name\t: Fancy CPU 9000 @ 3GHz\n")
    assert cpu_model(cpuinfo) == "Fancy CPU 9000 @ 3GHz"


def test_cpu_model_falls_back_to_platform_processor(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nCPU part\t: 0xd0c\n")  # ARM lists no model name
    monkeypatch.setattr(environment.platform, "processor", lambda: "aarch64")
    assert cpu_model(cpuinfo) == "aarch64"
    assert cpu_model(tmp_path / "missing") == "aarch64"


def test_cpu_model_unknown_when_nothing_says(tmp_path, monkeypatch):
    monkeypatch.setattr(environment.platform, "processor", lambda: "")
    assert cpu_model(tmp_path / "missing") == "unknown"
