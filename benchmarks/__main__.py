"""`python -m benchmarks` (what `make bench` runs): every benchmarks/bench_*.py module's `main()`, in name order,
each with its default arguments. A failing benchmark is reported and the others still run; the exit
status is non-zero if any failed."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    failed = []
    for path in sorted(here.glob("bench_*.py")):
        print(f"== {path.name}", flush=True)
        spec = importlib.util.spec_from_file_location(f"benchmarks.{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        saved = sys.argv
        sys.argv = [str(path)]
        try:
            spec.loader.exec_module(module)
            rc = module.main()
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except Exception:
            traceback.print_exc()
            rc = 1
        finally:
            sys.argv = saved
        if rc:
            failed.append(path.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
