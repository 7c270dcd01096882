"""How results/ is layered: no two modules import each other (imports inside functions count), storing a
run never loads the report, scoring without Spark never loads pyspark, and only results.publish makes
plots and pages."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANALYSIS = ("controller/analysis.py", "controller/runner.py")


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["faultline", *parts])


def _imports(path: Path) -> set[str]:
    """Every faultline module `path` imports, wherever the import statement is (functions, TYPE_CHECKING)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("faultline.")}
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.startswith("faultline")
        ):
            for a in node.names:  # `from faultline.results import store` imports a module
                sub = f"{node.module}.{a.name}"
                is_module = (ROOT / Path(*sub.split(".")[1:])).with_suffix(".py").exists()
                out.add(sub if is_module else node.module)
    return out


def _graph() -> dict[str, set[str]]:
    files = sorted((ROOT / "results").glob("*.py")) + [ROOT / f for f in ANALYSIS]
    return {_module(f): _imports(f) for f in files}


def test_no_import_cycles_in_results() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(mod: str, path: list[str]) -> None:
        state[mod] = 1
        for dep in sorted(graph.get(mod, ())):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep] if dep in path else [mod, dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[mod] = 2

    for mod in graph:
        if mod not in state:
            visit(mod, [mod])
    assert cycles == []


def test_results_stays_below_controller_and_checkers_and_pages_below_results() -> None:
    for mod, deps in _graph().items():
        if mod.startswith("faultline.results."):
            assert not any(d.startswith(("faultline.controller", "faultline.nemesis")) for d in deps), mod
    for f in sorted((ROOT / "checkers").glob("*.py")) + sorted((ROOT / "pages").glob("*.py")):
        assert not any(d.startswith(("faultline.results", "faultline.controller")) for d in _imports(f)), f


def test_only_publish_makes_plots_and_pages() -> None:
    makers = {"faultline.pages.perf", "faultline.pages.timeline", "faultline.pages.counterexample"}
    users = sorted(mod for mod, deps in _graph().items() if deps & makers)
    assert users == ["faultline.results.publish"]


def _python(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_finishing_a_run_never_loads_the_report(tmp_path: Path) -> None:
    loaded = _python(f"""
import json, sys
from faultline.results.store import Store
run = Store({str(tmp_path)!r}).create_run("t", {{"workload": "register"}})
run.history_path.write_text(json.dumps({{"index": 0, "time": 1, "type": "invoke", "process": 0, "f": "read"}}) + "\\n")
run.finish({{"valid": "unknown"}})
assert not run.report_path.exists()
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("faultline.results.report", "faultline.results.publish",
                                                              "faultline.checkers", "matplotlib")))))
""")
    assert loaded == []


def test_pandas_scoring_never_loads_pyspark(tmp_path: Path) -> None:
    loaded = _python(f"""
import json, sys
from faultline.results.engines import score_store
from faultline.results.synth import synth_store
synth_store({str(tmp_path / "s")!r}, runs=2, ops=60, seed=1, jobs=1)
result = score_store({str(tmp_path / "s")!r}, engine="pandas")
assert result.engine == "pandas" and (result.out_dir / "scorecard.html").exists()
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("pyspark", "py4j")))))
""")
    assert loaded == []
