"""Compile the project's .proto files (the node's, and the gRPC APIs of DBs the harness talks to, in
dbs/protos) into Python gRPC stubs.

Used by the package build (setup.py) and, for source checkouts and editable
installs, on import of `faultline.node.protos` when a stub is missing or older
than its .proto. Generated files are never edited or committed.

The stubs import each other as `faultline.node.protos...`, but in the checkout
the package `faultline` is the repository root itself: protoc is pointed at a
temporary folder in which a link named `faultline` leads to the root, so the
import paths it writes are the installed ones.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
ROOT = PROTO_DIR.parent.parent
PACKAGE = "faultline"
# folders (relative to the package root) whose *.proto files are compiled
PROTO_DIRS = ("node/protos", "dbs/protos")


def _protos(root: Path) -> list[Path]:
    return [p for d in PROTO_DIRS for p in sorted((root / d).glob("*.proto"))]


def stale_protos(root: Path = ROOT) -> list[Path]:
    """The .proto files whose generated stubs are missing or older than the source."""
    out = []
    for proto in _protos(root):
        stem = proto.with_suffix("")
        stubs = [Path(f"{stem}_pb2.py"), Path(f"{stem}_pb2_grpc.py")]
        if any(not s.exists() or s.stat().st_mtime < proto.stat().st_mtime for s in stubs):
            out.append(proto)
    return out


def compile_protos(root: Path = ROOT, only_stale: bool = False) -> list[str]:
    """Run grpc_tools.protoc over every PROTO_DIRS/*.proto; returns the files compiled."""
    import grpc_tools
    from grpc_tools import protoc

    root = Path(root).resolve()
    protos = stale_protos(root) if only_stale else _protos(root)
    rel = [f"{PACKAGE}/{p.relative_to(root)}" for p in protos]
    if not rel:
        return []
    include = str(Path(grpc_tools.__file__).parent / "_proto")
    with tempfile.TemporaryDirectory(prefix="faultline-protoc-") as tmp:
        (Path(tmp) / PACKAGE).symlink_to(root, target_is_directory=True)
        args = [
            "grpc_tools.protoc",
            f"-I{tmp}",
            f"-I{include}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            *rel,
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {rel}")
    return rel


if __name__ == "__main__":
    print("\n".join(compile_protos()) or "nothing to compile")
