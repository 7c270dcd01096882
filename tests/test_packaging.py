"""The distribution: a wheel built from the checkout carries the generated gRPC stubs, every top-level
package, the console script and the pytest plugin entry point."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("node", "cluster", "nemesis", "workloads", "controller", "checkers", "results")


def test_wheel_contains_generated_stubs_packages_and_entry_points(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("faultline-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for proto in (ROOT / "node" / "protos").glob("*.proto"):
        assert f"node/protos/{proto.stem}_pb2.py" in names
        assert f"node/protos/{proto.stem}_pb2_grpc.py" in names
    for pkg in PACKAGES:
        assert f"{pkg}/__init__.py" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "faultline = controller.cli:main" in text
    assert "faultline = controller.pytest_plugin" in text
