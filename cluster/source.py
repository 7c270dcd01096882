"""Where the `faultline` package is, and how a node gets the parts of it that run there.

Nodes run `python -m faultline...` with a PYTHONPATH entry whose child `faultline` is the package.
In an installed wheel that is site-packages; in a checkout (the editable install) the package is the
repository root itself, so the host side gets a folder holding one link, `faultline` -> the root.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import tarfile
import uuid
from pathlib import Path

import faultline

PACKAGE = "faultline"
PACKAGE_DIR = Path(faultline.__file__).resolve().parent
# What a node needs of the package: the root module and these subpackages (the daemon manager, and
# whatever the DB runs there; the bundled store is `node`; `testing` for the placeholder daemon) ...
NODE_SUBPACKAGES = ("cluster", "node", "testing")
# ... narrowed to these files where a node needs only some (the placeholder imports only the standard
# library, so the fake and the MiniCluster stay on the host).
NODE_MODULES: dict[str, tuple[str, ...]] = {"testing": ("__init__.py", "placeholder.py")}


def _skip_bytecode(ti: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "__pycache__" in ti.name or ti.name.endswith(".pyc") else ti


@functools.cache
def host_pythonpath() -> str:
    """A folder to put on PYTHONPATH on this host so that `import faultline` finds this package. Made
    once per process (backends ask from many threads at once); the link is swapped in atomically, so
    processes that share the folder never see it missing."""
    if PACKAGE_DIR.name == PACKAGE:
        return str(PACKAGE_DIR.parent)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "faultline" / "src"
    folder = base / hashlib.sha256(str(PACKAGE_DIR).encode()).hexdigest()[:16]
    link = folder / PACKAGE
    if not (link.is_symlink() and link.resolve() == PACKAGE_DIR):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{PACKAGE}.{uuid.uuid4().hex}"
        tmp.symlink_to(PACKAGE_DIR, target_is_directory=True)
        tmp.replace(link)
    return str(folder)


def node_tarball(
    subpackages: tuple[str, ...] = NODE_SUBPACKAGES, modules: dict[str, tuple[str, ...]] | None = None
) -> bytes:
    """A gzipped tarball of `faultline/__init__.py` and the named subpackages, to unpack into a folder
    that goes on a node's PYTHONPATH. `modules` narrows a subpackage to some of its files (default
    NODE_MODULES)."""
    modules = NODE_MODULES if modules is None else modules
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(PACKAGE_DIR / "__init__.py", arcname=f"{PACKAGE}/__init__.py")
        for pkg in subpackages:
            names = modules.get(pkg)
            if names is None:
                tar.add(PACKAGE_DIR / pkg, arcname=f"{PACKAGE}/{pkg}", filter=_skip_bytecode)
                continue
            for name in names:
                tar.add(PACKAGE_DIR / pkg / name, arcname=f"{PACKAGE}/{pkg}/{name}")
    return buf.getvalue()
