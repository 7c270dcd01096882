"""The distribution: one import package, `faultline`, that lives beside anyone else's code.

A wheel built from the checkout carries exactly one top-level package with the generated gRPC stubs, the
console script and the pytest plugin entry point. Installed into a fresh venv, it neither shadows nor is
shadowed by a project's own `controller/` package or `results.py`, and its entry points run there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the files git knows of (a build leaves build/ and *.egg-info behind)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (found,) = base.glob("faultline-*.whl")
    return found


@pytest.mark.integration  # builds the wheel and installs it into fresh virtualenvs
def test_wheel_holds_one_top_level_package_with_stubs_and_entry_points(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "faultline",
        "-".join(wheel.name.split("-")[:2]) + ".dist-info",
    }
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["faultline"]
    for proto in (ROOT / "node" / "protos").glob("*.proto"):
        assert f"faultline/node/protos/{proto.stem}_pb2.py" in names
        assert f"faultline/node/protos/{proto.stem}_pb2_grpc.py" in names
    # every folder of the package ships: a new one missing from setup.py's SUBPACKAGES fails here
    for pkg in sorted(p.parent.name for p in ROOT.glob("*/__init__.py")):
        if pkg not in ("tests", "benchmarks"):
            assert f"faultline/{pkg}/__init__.py" in names, (
                f"{pkg}/ is not in the wheel (setup.py SUBPACKAGES)"
            )
    assert "faultline/pages/lanes.js" in names  # inlined into timeline.html and counterexample.html
    # the repository's own files are not part of the package
    assert not [
        n
        for n in names
        if n.startswith(("faultline/tests/", "faultline/benchmarks/"))
        or n in ("faultline/setup.py", "faultline/pyproject.toml", "faultline/README.md")
    ]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "faultline = faultline.controller.cli:main" in text
    assert "faultline = faultline.controller.pytest_plugin" in text


SCRATCH_TEST = """
import controller
import results


def test_the_project_keeps_its_own_names():
    assert controller.WHOSE == "scratch" and results.WHOSE == "scratch"


def test_faultline_plugin_is_loaded(request):
    assert request.config.pluginmanager.has_plugin("faultline")
    assert request.config.getoption("--chaos") is False
"""


@pytest.mark.integration  # builds the wheel and installs it into fresh virtualenvs
def test_installed_wheel_lives_beside_a_project_with_its_own_controller_and_results(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(wheel), "pytest"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    project = tmp_path / "project"
    (project / "controller").mkdir(parents=True)
    (project / "controller" / "__init__.py").write_text('WHOSE = "scratch"\n')
    (project / "results.py").write_text('WHOSE = "scratch"\n')
    (project / "test_scratch.py").write_text(SCRATCH_TEST)
    run = subprocess.run(
        [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-2000:]
    cli = subprocess.run(
        [str(venv / "bin" / "faultline"), "--help"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert cli.returncode == 0 and "campaign" in cli.stdout, cli.stderr
    mod = subprocess.run(
        [str(py), "-m", "faultline", "--version"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert mod.returncode == 0 and mod.stdout.startswith("faultline "), mod.stderr
    tool = subprocess.run(
        [str(py), "-m", "faultline.node", "tool", "--help"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert tool.returncode == 0 and "usage" in tool.stdout.lower(), tool.stderr
    where = subprocess.run(
        [
            str(py),
            "-c",
            "import faultline, faultline.node.protos.node_pb2 as p; "
            "print(faultline.__file__); print(p.__file__)",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert where.returncode == 0 and all(str(venv) in line for line in where.stdout.split()), where.stdout
