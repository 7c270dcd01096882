"""The layer contract (pyproject.toml's [tool.importlinter]) holds, and no two modules import each other.

Data flows one way (docs/architecture.md): a back-import, even one inside a function, fails here, so CI
fails on it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is not installed (it is in the [dev] extra)"
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_no_import_cycles_between_modules() -> None:
    """A module never reaches back to a module that imports it (a package and its own submodules aside).
    Imports for the type checker only (`if TYPE_CHECKING:`) run nothing and are left out, as in the
    contracts."""
    graph = grimp.build_graph("faultline", exclude_type_checking_imports=True)
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported.startswith(importer + ".") or importer.startswith(imported + "."):
                continue
            if graph.chain_exists(importer=imported, imported=importer):
                cycles.append(
                    " -> ".join([importer, *graph.find_shortest_chain(importer=imported, imported=importer)])
                )
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
