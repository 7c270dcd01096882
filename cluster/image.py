"""The node image: a Debian bookworm root filesystem plus a venv with the DB's Python dependencies.

Built on this machine with no registry: `mmdebstrap` writes a root filesystem tarball through the apt
mirror this machine is already configured with (read at build time, never stored in the repository), the
wheels are downloaded on the host (the image's python3 is 3.11, the same ABI as ours) and installed inside,
and `docker import` turns the tarball into an image. The tag is a hash of the inputs, so a warm build is a
lookup. The project's source is bind-mounted into containers at run time, so code changes need no rebuild.

What the harness itself needs on every node is BASE_PACKAGES; a DB adds its own Debian packages and the
Python packages its node-side code imports (ClusterSpec.packages / python_packages), and both are inputs
of the tag.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from faultline.cluster.base import ClusterSpec

IMAGE_REPO = "faultline-node"
IMAGE_LABEL = "org.faultline.image"
SUITE = "bookworm"
# Bump when the recipe below changes in a way the inputs do not show.
RECIPE_VERSION = 3
BASE_PACKAGES = (
    "python3",
    "python3-venv",
    "iptables",
    "iproute2",
    "procps",
    "faketime",
    "openssh-server",
    "ca-certificates",
    "iputils-ping",
    "netcat-openbsd",
)
VENV = "/opt/venv"
# Keep the image small: no documentation, manuals or locales.
DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/info/*",
)


class ImageBuildError(RuntimeError):
    """A build step failed; the message names the step."""


@dataclass
class BuildReport:
    tag: str
    built: bool
    seconds: float
    steps: dict[str, float] = field(default_factory=dict)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "faultline"


def py_dep_pins(python_packages: Sequence[str] = ()) -> list[str]:
    """The Python packages pinned to the versions installed on this host, so that code generated here
    (a DB's gRPC stubs, say) matches the runtime inside the image."""
    pins = []
    for name in python_packages:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(name)
    return pins


def image_packages(packages: Sequence[str] = ()) -> list[str]:
    """The harness's packages, then the DB's that are not among them."""
    return [*BASE_PACKAGES, *(p for p in dict.fromkeys(packages) if p not in BASE_PACKAGES)]


def image_tag(packages: Sequence[str] = (), python_packages: Sequence[str] = ()) -> str:
    """`faultline-node:<hash of the inputs>`: the packages, the pinned wheels and the recipe version."""
    inputs = {
        "suite": SUITE,
        "packages": image_packages(packages),
        "py": py_dep_pins(python_packages),
        "recipe": RECIPE_VERSION,
        "excludes": DPKG_EXCLUDES,
    }
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
    return f"{IMAGE_REPO}:{digest}"


def _recipe_hash() -> str:
    """The inputs of an image other than its packages: two images with the same recipe hash differ only
    in what is installed, so one whose packages include another's can stand in for it."""
    recipe = {"suite": SUITE, "recipe": RECIPE_VERSION, "excludes": DPKG_EXCLUDES}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def _content_labels(packages: Sequence[str], python_packages: Sequence[str]) -> dict[str, str]:
    return {
        f"{IMAGE_LABEL}.recipe": _recipe_hash(),
        f"{IMAGE_LABEL}.packages": ",".join(image_packages(packages)),
        f"{IMAGE_LABEL}.py": ",".join(py_dep_pins(python_packages)),
    }


def covering_image(packages: Sequence[str] = (), python_packages: Sequence[str] = ()) -> str | None:
    """A local node image of the same recipe that has every package asked for (Debian's and the pinned
    wheels), whatever else it has: `make image` builds one for every DB at once, and each DB's runs use
    it instead of building an image of their own (a minute each on two cores)."""
    want_deb, want_py = set(image_packages(packages)), set(py_dep_pins(python_packages))
    found = []
    for img in _docker().images.list(
        name=IMAGE_REPO, filters={"label": f"{IMAGE_LABEL}.recipe={_recipe_hash()}"}
    ):
        labels = img.labels or {}
        deb = set(filter(None, labels.get(f"{IMAGE_LABEL}.packages", "").split(",")))
        py = set(filter(None, labels.get(f"{IMAGE_LABEL}.py", "").split(",")))
        tags = [t for t in img.tags if t.startswith(f"{IMAGE_REPO}:")]
        if tags and want_deb <= deb and want_py <= py:
            found.append((len(deb) + len(py), tags[0]))
    return min(found)[1] if found else None


# ---------------------------------------------------------------- apt sources of this machine


def _one_line_sources(text: str) -> list[tuple[str, str, list[str]]]:
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        parts = line.split()[1:]
        if parts and parts[0].startswith("["):
            while parts and not parts[0].endswith("]"):
                parts.pop(0)
            parts = parts[1:]
        if len(parts) >= 3:
            out.append((parts[0], parts[1], parts[2:]))
    return out


def _deb822_sources(text: str) -> list[tuple[str, str, list[str]]]:
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                out.append((uri, suite, fields.get("components", "main").split()))
    return out


def apt_sources(root: Path = Path("/etc/apt")) -> list[str]:
    """One-line `deb URI SUITE main` entries for bookworm taken from this machine's apt configuration."""
    found: list[tuple[str, str, list[str]]] = []
    main = root / "sources.list"
    if main.is_file():
        found += _one_line_sources(main.read_text(errors="replace"))
    d = root / "sources.list.d"
    if d.is_dir():
        for f in sorted(d.iterdir()):
            if f.suffix == ".list":
                found += _one_line_sources(f.read_text(errors="replace"))
            elif f.suffix == ".sources":
                found += _deb822_sources(f.read_text(errors="replace"))
    wanted = {SUITE, f"{SUITE}-updates", f"{SUITE}-security", f"{SUITE}/updates"}
    lines = []
    for uri, suite, comps in found:
        if suite in wanted and "main" in comps:
            line = f"deb {uri} {suite} main"
            if line not in lines:
                lines.append(line)
    if not any(line.split()[2] == SUITE for line in lines):
        raise ImageBuildError(
            f"step 'read apt sources' failed: no '{SUITE} main' source in {root}/sources.list(.d); "
            "configure a Debian bookworm mirror for apt first"
        )
    return lines


# ---------------------------------------------------------------- build


def _run(step: str, argv: list[str], timeout: float, log: Callable[[str], None]) -> None:
    log(f"  {step}: {' '.join(argv[:3])} ...")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise ImageBuildError(
            f"step '{step}' failed: {exc.filename} not found (run scripts/system-deps.sh)"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise ImageBuildError(f"step '{step}' failed: timed out after {timeout:.0f} s") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise ImageBuildError(f"step '{step}' failed (exit {proc.returncode}):\n{tail}")


def download_wheels(dest: Path, pins: list[str], log: Callable[[str], None]) -> None:
    """cp311 manylinux wheels for the pinned deps, fetched on the host (the image has no pip network)."""
    dest.mkdir(parents=True, exist_ok=True)
    have = {p.name.lower() for p in dest.glob("*.whl")}
    if all(
        any(h.startswith(pin.replace("==", "-").lower()) for h in have) for pin in pins if "==" in pin
    ) and all("==" in pin for pin in pins):
        log("  wheels: cached")
        return
    _run(
        "download wheels",
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
            "--abi",
            "cp311",
            "--platform",
            "manylinux2014_x86_64",
            "--platform",
            "manylinux_2_17_x86_64",
            "--platform",
            "manylinux_2_28_x86_64",
            "-d",
            str(dest),
            *pins,
        ],
        600,
        log,
    )


def _docker():
    import docker

    return docker.from_env(timeout=600)


def image_exists(tag: str) -> bool:
    import docker.errors

    try:
        _docker().images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _mmdebstrap_argv(
    packages: Sequence[str], pins: list[str], wheels: Path, rootfs: Path, sources: list[str]
) -> list[str]:
    """The mmdebstrap command line for the root filesystem: packages, a venv with the wheels, no secrets."""
    names = " ".join(p.split("==")[0] for p in pins)
    install = (
        [
            f'--customize-hook=chroot "$1" {VENV}/bin/pip install -q --no-index --no-compile '
            f"--find-links /tmp/wheels {names}"
        ]
        if names
        else []
    )
    hooks = [
        f'--customize-hook=mkdir -p "$1/tmp/wheels" && cp {wheels}/*.whl "$1/tmp/wheels/" 2>/dev/null; true',
        f'--customize-hook=chroot "$1" python3 -m venv {VENV}',
        *install,
        '--customize-hook=rm -rf "$1/tmp/wheels" "$1/var/lib/apt/lists"/* "$1/var/cache/apt"/*',
        # per-container host keys are made at sshd start (ssh-keygen -A), never baked in
        '--customize-hook=rm -f "$1"/etc/ssh/ssh_host_*',
        '--customize-hook=mkdir -p "$1/run/sshd" "$1/var/lib/faultline"',
    ]
    return [
        "mmdebstrap",
        "--variant=apt",
        "--quiet",
        f"--include={','.join(image_packages(packages))}",
        *[f"--dpkgopt={x}" for x in DPKG_EXCLUDES],
        *hooks,
        SUITE,
        str(rootfs),
        *sources,
    ]


def _import_rootfs(
    client, rootfs: Path, tag: str, packages: Sequence[str], python_packages: Sequence[str], log
) -> None:
    """`docker import` the root filesystem as `tag`, with the image's environment and labels."""
    repo, version = tag.split(":")
    changes = [
        f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV PYTHONDONTWRITEBYTECODE=1",
        "ENV PYTHONPATH=/opt/faultline",
        f"LABEL {IMAGE_LABEL}={version}",
        *(f"LABEL {k}={v}" for k, v in _content_labels(packages, python_packages).items()),
        'CMD ["sleep", "infinity"]',
    ]
    log("  docker import ...")
    try:
        client.api.import_image_from_file(str(rootfs), repository=repo, tag=version, changes=changes)
    except Exception as exc:
        raise ImageBuildError(f"step 'docker import' failed: {exc}") from exc
    if not image_exists(tag):
        raise ImageBuildError(f"step 'docker import' failed: {tag} is not in the image list afterwards")


def _connected_docker():
    try:
        client = _docker()
        client.ping()
    except Exception as exc:
        raise ImageBuildError(f"step 'connect to docker' failed: {exc}") from exc
    return client


def build_image(
    packages: Sequence[str] = (),
    python_packages: Sequence[str] = (),
    rebuild: bool = False,
    log: Callable[[str], None] = lambda s: None,
) -> BuildReport:
    """Build the node image for a DB's packages unless an image with the same input hash exists, or one
    of the same recipe with all of those packages and more (covering_image), or `rebuild`."""
    t0 = time.monotonic()
    tag = image_tag(packages, python_packages)
    pins = py_dep_pins(python_packages)
    steps: dict[str, float] = {}
    client = _connected_docker()
    if not rebuild and image_exists(tag):
        return BuildReport(tag, False, time.monotonic() - t0)
    covering = None if rebuild else covering_image(packages, python_packages)
    if covering is not None:
        return BuildReport(covering, False, time.monotonic() - t0)
    if shutil.which("mmdebstrap") is None:
        raise ImageBuildError(
            "step 'find mmdebstrap' failed: mmdebstrap is not installed (run scripts/system-deps.sh)"
        )
    log(f"building {tag}")
    old_id = None
    with contextlib.suppress(Exception):
        old_id = client.images.get(tag).id
    sources = apt_sources()
    wheels = cache_dir() / "wheels"
    s = time.monotonic()
    download_wheels(wheels, pins, log)
    steps["wheels"] = time.monotonic() - s
    with tempfile.TemporaryDirectory(prefix="faultline-image-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        argv = _mmdebstrap_argv(packages, pins, wheels, rootfs, sources)
        s = time.monotonic()
        _run("mmdebstrap root filesystem", argv, 1200, log)
        steps["rootfs"] = time.monotonic() - s
        s = time.monotonic()
        _import_rootfs(client, rootfs, tag, packages, python_packages, log)
        steps["import"] = time.monotonic() - s
    if old_id and old_id != client.images.get(tag).id:
        # the rebuilt image took the tag; drop the old one unless a container still uses it
        with contextlib.suppress(Exception):
            client.images.remove(old_id)
    return BuildReport(tag, True, time.monotonic() - t0, steps)


def ensure_image_for(spec: ClusterSpec, log: Callable[[str], None] = lambda s: None) -> str:
    """The tag of the node image a cluster spec needs (its DB's packages), building it first if needed."""
    return build_image(spec.packages, spec.python_packages, False, log).tag
