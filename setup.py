"""Build hook: compile node/protos/*.proto into Python gRPC stubs before packaging.

The compiler lives in node/protos/_compile.py (one place for it); it is loaded
by path because the package is not importable inside an isolated build.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithProtos(build_py):
    def run(self) -> None:
        spec = importlib.util.spec_from_file_location("_faultline_protoc", ROOT / "node/protos/_compile.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.compile_protos(ROOT)
        super().run()


# The linearizability checker's compiled core; optional: without a C compiler the
# pure-Python search (identical verdicts) is used.
WGL = Extension("checkers._wgl", ["checkers/_wgl.c"], optional=True, extra_compile_args=["-O2"])

setup(cmdclass={"build_py": BuildWithProtos}, ext_modules=[WGL])
