"""Build hook: one import package, `faultline`, mapped to the repository root, whose top-level folders
are its subpackages; and the gRPC stubs compiled from node/protos/*.proto before packaging.

The compiler lives in node/protos/_compile.py (one place for it); it is loaded by path because the
package is not importable inside an isolated build.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# The folders that are subpackages of `faultline`; tests/, benchmarks/, docs/ ... are not installed.
SUBPACKAGES = (
    "core",
    "node",
    "gen",
    "db",
    "dbs",
    "cluster",
    "nemesis",
    "workloads",
    "controller",
    "history",
    "checkers",
    "pages",
    "results",
    "testing",
)


def packages() -> list[str]:
    found = find_packages(where=str(ROOT), include=[f"{p}*" for p in SUBPACKAGES])
    return ["faultline", *(f"faultline.{p}" for p in found if p.split(".")[0] in SUBPACKAGES)]


class BuildWithProtos(build_py):
    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        """Everything but this build script itself, which sits in the root package's folder."""
        found = super().find_package_modules(package, package_dir)
        return [m for m in found if not (package == "faultline" and m[1] == "setup")]

    def run(self) -> None:
        spec = importlib.util.spec_from_file_location("_faultline_protoc", ROOT / "node/protos/_compile.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.compile_protos(ROOT)
        super().run()


# The linearizability checker's compiled core; optional: without a C compiler the
# pure-Python search (identical verdicts) is used.
WGL = Extension("faultline.checkers._wgl", ["checkers/_wgl.c"], optional=True, extra_compile_args=["-O2"])
# Strongly connected components for the Elle-class checkers; optional too: without it they use scipy's.
SCC = Extension(
    "faultline.checkers.elle._scc", ["checkers/elle/_scc.c"], optional=True, extra_compile_args=["-O2"]
)
# The list-append checker's hot loops and detect_kind's scan; optional too: without it the same loops in Python.
APPEND = Extension(
    "faultline.checkers.elle._append", ["checkers/elle/_append.c"], optional=True, extra_compile_args=["-O2"]
)
# Our JSONL's usual line, decoded and normalised; optional too: without it the reader's Python loop.
JSONL = Extension("faultline.history._jsonl", ["history/_jsonl.c"], optional=True, extra_compile_args=["-O2"])

setup(
    packages=packages(),
    package_dir={"faultline": "."},
    cmdclass={"build_py": BuildWithProtos},
    ext_modules=[WGL, SCC, APPEND, JSONL],
)
