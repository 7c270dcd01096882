"""The SSH backend: real hosts driven over paramiko.

Key-based auth only; host keys are checked against known_hosts (an explicit `accept_new_host_keys`
accepts unknown keys of throwaway test hosts, still refusing changed ones). Commands run as root,
through `sudo -n` when the login user is not root. Every command has a deadline; stdout and stderr are
drained together while it runs (a chatty command cannot fill a pipe and deadlock); a dropped session is
reconnected and the command retried when it never started. The `cluster` and `node` packages are uploaded
with SFTP, so a host needs only python3 with grpcio/protobuf. Master DNS names live in a marked block of
each host's /etc/hosts, rewritten in place.

Hosts file (TOML):

    [ssh]                      # defaults for every host
    user = "root"
    key = "~/.ssh/id_ed25519"
    known_hosts = "~/.ssh/known_hosts"
    accept_new_host_keys = false
    python = "python3"

    [[node]]
    name = "m1"                # its role by the name's prefix (m: master, t: tablet server), or role = "..."
    address = "192.0.2.10"

Each value is checked against SSHHost's field types (HOST_RULES) before anything connects. `workdir` and
`source_dir` get a marker file (MARKER) when Faultline creates them (or takes over an empty one); `down`
and `destroy` delete only a directory holding it, and a directory with contents but no marker is never
used, so no hosts file can make Faultline delete /usr/bin or a home directory.

A run with a disk fault (ClusterSpec.disk_dirs) gets the disk layer on each host, mounted at the data
directories themselves as on the local backend: `up` first asks every host for FUSE (/dev/fuse, and root
or fusermount3) and refuses with a UsageError (exit 254) before anything is uploaded when one lacks it;
then it copies the layer binary built on this machine (it links only libc and libgcc_s: no libfuse is
needed on the host) to `workdir/.faultline-disk/` and starts the layers there, detached. The layer control
is cluster/layerctl.py run on the host (`python3 -c`), the same code the other backends run locally:
`lose` and `checkpoint` through its control socket, and unmount and residue on `down` and `destroy`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import posixpath
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultline.cluster import disklayer, layerctl, state
from faultline.cluster.base import (
    ClusterError,
    ClusterSpec,
    NodeBackend,
    NodeInfo,
    RemoteTimeout,
)
from faultline.cluster.collect import extract_tar
from faultline.cluster.source import node_tarball
from faultline.core import inputs
from faultline.core.errors import UsageError

# Written into workdir and source_dir when Faultline creates them; only a directory holding it is deleted.
MARKER = ".faultline-created"
# $1 the source tarball, $2 source_dir, $3 workdir. A directory that exists without the marker is not
# Faultline's: refuse it, unless it is empty (an image's mount point), which is taken over and marked.
# The old source is replaced; the workdir (node data) is kept.
_CLAIM_SH = (
    "m=" + MARKER + "; tgz=$1; shift\n"
    'for d in "$@"; do\n'
    '  if [ -e "$d" ] && [ ! -f "$d/$m" ] && ! { [ -d "$d" ] && [ -z "$(ls -A -- "$d")" ]; }; then\n'
    '    echo "$d exists and Faultline did not create it (no $m in it): give a dedicated directory" >&2; exit 3\n'
    "  fi\n"
    "done\n"
    'rm -rf -- "$1" && mkdir -p "$1" "$2" && touch "$1/$m" "$2/$m" && tar -xzf "$tgz" -C "$1" && rm -f "$tgz"\n'
)
# Deletes each directory that holds the marker; one without it is left alone and named on stderr.
_REMOVE_SH = (
    "m=" + MARKER + "\n"
    'for d in "$@"; do\n'
    '  if [ -f "$d/$m" ] && [ ! -L "$d" ]; then rm -rf -- "$d"\n'
    '  elif [ -e "$d" ]; then echo "kept $d: Faultline did not create it (no $m in it)" >&2; fi\n'
    "done\n"
)
# The node's disk layers (cluster/layerctl.py's `base`) and the layer binary, inside its workdir.
LAYER_DIR = ".faultline-disk"
# What a host needs to mount the disk layer; prints why not and exits 3 (commands run as root, or
# through sudo, so root is the common case; fusermount3 lets a FUSE mount be made without it).
_FUSE_SH = (
    '[ -e /dev/fuse ] || { echo "it has no /dev/fuse (the disk layer is a FUSE file system)"; exit 3; }\n'
    '[ "$(id -u)" = 0 ] || command -v fusermount3 >/dev/null '
    '|| { echo "it has no fusermount3 (Debian package fuse3) and commands do not run as root"; exit 3; }\n'
)
HOSTS_BEGIN = "# faultline begin"
HOSTS_END = "# faultline end"
# Rewrites the marked block of /etc/hosts in place (Docker bind-mounts /etc/hosts; a rename would fail).
_HOSTS_PY = (
    "import sys\n"
    "b, e, block = sys.argv[1], sys.argv[2], sys.argv[3]\n"
    "with open('/etc/hosts', 'r+') as f:\n"
    "    lines = f.read().splitlines()\n"
    "    out, skip = [], False\n"
    "    for ln in lines:\n"
    "        if ln.strip() == b: skip = True; continue\n"
    "        if ln.strip() == e: skip = False; continue\n"
    "        if not skip: out.append(ln)\n"
    "    if block: out += [b, *block.splitlines(), e]\n"
    "    f.seek(0); f.write('\\n'.join(out) + '\\n'); f.truncate()\n"
)


@dataclass
class SSHHost:
    name: str
    address: str
    role: str = ""
    user: str = "root"
    port: int = 22
    key: str = "~/.ssh/id_ed25519"
    known_hosts: str = "~/.ssh/known_hosts"
    accept_new_host_keys: bool = False
    python: str = "python3"
    workdir: str = "/var/lib/faultline"
    source_dir: str = "/opt/faultline-src"
    iface: str = "eth0"
    connect_timeout: float = 10.0
    dns: list[str] = field(default_factory=list)


def _is_text(v: object) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _is_abs_dir(v: object) -> bool:
    return _is_text(v) and str(v).startswith("/") and os.path.normpath(str(v)) != "/"


# The hosts file's schema: what each SSHHost field must be.
HOST_RULES: dict[str, tuple[Callable[[object], bool], str]] = {
    "name": (inputs.is_safe_name, "a node name: letters, digits, '.', '_', '+', '-'"),
    "address": (_is_text, "a host name or IP address"),
    "role": (lambda v: isinstance(v, str), "a role name (master, tserver, ...)"),
    "user": (_is_text, "a user name"),
    "port": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536,
        "a port number (1-65535)",
    ),
    "key": (_is_text, "the path of a private key"),
    "known_hosts": (_is_text, "the path of a known_hosts file"),
    "accept_new_host_keys": (lambda v: isinstance(v, bool), "true or false"),
    "python": (_is_text, "the python to run on the host"),
    "workdir": (_is_abs_dir, "an absolute path of a directory for Faultline alone"),
    "source_dir": (_is_abs_dir, "an absolute path of a directory for Faultline alone"),
    "iface": (_is_text, "a network interface name"),
    "connect_timeout": (inputs.is_positive_number, "a finite number of seconds > 0"),
    "dns": (lambda v: isinstance(v, list) and all(_is_text(x) for x in v), "a list of DNS names"),
}


def load_hosts(path: str | Path) -> list[SSHHost]:
    """Parses and validates a hosts file; a mistake in it is a ValueError with one clear line."""
    p = Path(path)
    data = inputs.read_toml(p, "hosts file")
    bad_tables = set(data) - {"ssh", "node"}
    if bad_tables:
        raise ValueError(f"hosts file {p}: unknown key {sorted(bad_tables)[0]!r}; valid: [ssh], [[node]]")
    defaults = data.get("ssh", {})
    if not isinstance(defaults, dict):
        raise ValueError(f"hosts file {p}: ssh must be a table ([ssh] with the defaults), not {defaults!r}")
    nodes = data.get("node", [])
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise ValueError(f"hosts file {p}: node must be [[node]] tables, not {nodes!r}")
    hosts = []
    for i, entry in enumerate(nodes):
        merged = {**defaults, **entry}
        bad = set(merged) - set(HOST_RULES)
        if bad:
            raise ValueError(f"hosts file {p}: unknown keys {', '.join(sorted(bad))}")
        if "name" not in merged or "address" not in merged:
            raise ValueError(f"hosts file {p}: node #{i + 1} needs name and address")
        for key, value in merged.items():
            check, must = HOST_RULES[key]
            if not check(value):
                raise ValueError(f"hosts file {p}: node #{i + 1}: {key} must be {must}, not {value!r}")
        hosts.append(SSHHost(**merged))
    if not hosts:
        raise ValueError(f"hosts file {p}: no [[node]] entries")
    names = [h.name for h in hosts]
    if len(set(names)) != len(names):
        raise ValueError(f"hosts file {p}: node names must be unique: {', '.join(names)}")
    return hosts


def fit_spec(spec: ClusterSpec, hosts: list[SSHHost]) -> None:
    """Gives each host its role (its own `role`, else by its name's prefix, as `m3` is a master) and
    sets the spec's role counts to the hosts the file lists."""
    for h in hosts:
        try:
            h.role = h.role or spec.role_of(h.name)
            spec.role(h.role)
        except ClusterError as exc:
            raise ValueError(f"hosts file: node {h.name}: {exc}") from None
    for r in spec.roles:
        wanted, r.count = r.count, sum(h.role == r.role for h in hosts)
        if wanted and not r.count:
            raise ValueError(
                f'hosts file: no {r.role} (name them {r.prefix}1, {r.prefix}2, ... or set role = "{r.role}")'
            )


class _AcceptNew:
    """paramiko policy for throwaway hosts: remember an unknown key; a *changed* key is still refused
    (paramiko raises BadHostKeyException before asking a policy)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def missing_host_key(self, client, hostname, key) -> None:
        with self.lock:
            client.get_host_keys().add(hostname, key.get_name(), key)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


def _timed_out(node: str, argv: Sequence[str], timeout: float) -> RemoteTimeout:
    return RemoteTimeout(f"{node}: {' '.join(argv[:3])} timed out after {timeout:.1f} s")


class SSHRemote:
    """One paramiko connection per node, opened lazily, reopened when it drops."""

    def __init__(self, backend: SSHBackend) -> None:
        self.b = backend
        self._clients: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}

    def _host(self, node: str) -> SSHHost:
        return self.b.hosts[node]

    def _connect(self, node: str):
        import paramiko

        h = self._host(node)
        client = paramiko.SSHClient()
        kh = Path(os.path.expanduser(h.known_hosts))
        if kh.exists():
            client.load_host_keys(str(kh))
        if h.accept_new_host_keys:
            client.set_missing_host_key_policy(_AcceptNew(kh))  # type: ignore[arg-type]  # paramiko duck-types it
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                h.address,
                port=h.port,
                username=h.user,
                key_filename=os.path.expanduser(h.key),
                timeout=h.connect_timeout,
                banner_timeout=h.connect_timeout,
                auth_timeout=h.connect_timeout,
                look_for_keys=False,
                allow_agent=False,
            )
        except paramiko.BadHostKeyException as exc:
            raise ClusterError(
                f"{node}: host key of {h.address} CHANGED (not in {kh} as recorded); refusing"
            ) from exc
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise ClusterError(
                    f"{node}: {h.address} is not in {kh}; add its key, or set "
                    "accept_new_host_keys = true for throwaway hosts"
                ) from exc
            raise ClusterError(f"{node}: ssh to {h.user}@{h.address}:{h.port} failed: {exc}") from exc
        except OSError as exc:
            raise ClusterError(f"{node}: cannot reach {h.address}:{h.port}: {exc}") from exc
        return client

    def client(self, node: str, fresh: bool = False):
        lock = self._locks.setdefault(node, threading.Lock())
        with lock:
            c = self._clients.get(node)
            alive = c is not None and c.get_transport() is not None and c.get_transport().is_active()
            if fresh or not alive:
                if c is not None:
                    with contextlib.suppress(Exception):
                        c.close()
                c = self._connect(node)
                self._clients[node] = c
            return c

    def close(self) -> None:
        for c in self._clients.values():
            with contextlib.suppress(Exception):
                c.close()
        self._clients.clear()

    def command(self, node: str, argv: Sequence[str]) -> str:
        cmd = shlex.join(argv)
        return cmd if self._host(node).user == "root" else f"sudo -n -- {cmd}"

    def exec_bytes(
        self, node: str, argv: Sequence[str], timeout: float, stdin: bytes | None = None, attempts: int = 3
    ) -> tuple[int, bytes, bytes]:
        """Runs argv; only a session that could not be *opened* is retried (a started command never is)."""
        import paramiko

        last: Exception | None = None
        for attempt in range(attempts):
            try:
                chan = self.client(node, fresh=attempt > 0).get_transport().open_session(timeout=10)
                chan.exec_command(self.command(node, argv))
                break
            except (paramiko.SSHException, EOFError, OSError) as exc:
                last = exc
                time.sleep(min(0.5 * 2**attempt, 3))
        else:
            raise ClusterError(f"{node}: ssh session failed after {attempts} attempts: {last}")
        return self._drain(node, chan, argv, timeout, stdin)

    def _drain(
        self, node: str, chan, argv: Sequence[str], timeout: float, stdin: bytes | None
    ) -> tuple[int, bytes, bytes]:
        """Reads both streams to the channel's EOF, then takes the exit status, all within `timeout`.

        SSH may deliver the exit status before the last data: the status alone never ends the read."""
        if stdin:
            chan.sendall(stdin)
        chan.shutdown_write()
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        try:
            while True:
                if chan.recv_ready():
                    out += chan.recv(65536)
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                elif chan.eof_received or chan.closed:
                    break
                else:
                    self._wait(node, chan, argv, timeout, deadline)
            # after EOF the channel's pipe stays readable: wait on the status event, not on select
            if not chan.status_event.wait(max(0.0, deadline - time.monotonic())):
                raise _timed_out(node, argv, timeout)
            return chan.recv_exit_status(), bytes(out), bytes(err)
        finally:
            chan.close()

    @staticmethod
    def _wait(node: str, chan, argv: Sequence[str], timeout: float, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(node, argv, timeout)
        select.select([chan], [], [], min(left, 0.2))

    def exec(self, node: str, argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
        # `timeout` on the host too: the command dies with our deadline instead of lingering
        rc, out, err = self.exec_bytes(
            node, ["timeout", "-k", "2", f"{max(timeout, 0.1):.1f}", *argv], timeout + 5
        )
        if rc == 124:
            raise _timed_out(node, argv, timeout)
        return rc, out.decode(errors="replace"), err.decode(errors="replace")

    def put(self, node: str, path: str, data: bytes) -> None:
        """SFTP upload to a temporary name, then an atomic move (through sudo when not root)."""
        parent = os.path.dirname(path) or "."
        tmp = f"/tmp/.faultline-put-{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
        for attempt in range(3):
            try:
                with self.client(node, fresh=attempt > 0).open_sftp() as sftp:
                    sftp.putfo(io.BytesIO(data), tmp)
                break
            except (OSError, EOFError) as exc:
                if attempt == 2:
                    raise ClusterError(f"{node}: sftp upload of {path} failed: {exc}") from exc
        rc, _, err = self.exec(
            node, ["sh", "-c", 'mkdir -p "$1" && mv -f "$2" "$3"', "sh", parent, tmp, path], 30
        )
        if rc != 0:
            raise ClusterError(f"{node}: cannot place {path}: {err.strip()}")

    def get(self, node: str, path: str) -> bytes:
        rc, out, err = self.exec_bytes(node, ["cat", "--", path], 60)
        if rc != 0:
            raise ClusterError(f"{node}: cannot read {path}: {err.decode(errors='replace').strip()}")
        return out


class SSHBackend(NodeBackend):
    kind = "ssh"
    remote: SSHRemote

    def __init__(self, spec: ClusterSpec, hosts: list[SSHHost]) -> None:
        super().__init__(spec)
        self.hosts = {h.name: h for h in hosts}
        self.remote = SSHRemote(self)

    @classmethod
    def from_hosts_file(cls, path: str | Path, spec: ClusterSpec) -> SSHBackend:
        """A backend for the hosts a file lists, running what `spec` says (its role counts are set from
        the file)."""
        hosts = load_hosts(path)
        fit_spec(spec, hosts)
        return cls(spec, hosts)

    def node_dir(self, node: str) -> str:
        return self.hosts[node].workdir

    def python(self, node: str) -> str:
        return self.hosts[node].python

    def source_dir(self, node: str) -> str:
        return self.hosts[node].source_dir

    def iface(self, node: str) -> str:
        return self.hosts[node].iface

    # ------------------------------------------------------------------ lifecycle
    def up(self, spec: Any = None, log=lambda s: None) -> None:
        if state.load("ssh", self.spec.name):
            raise ClusterError(
                f"an ssh cluster named {self.spec.name!r} is up; "
                f"`faultline cluster down --cluster ssh --name {self.spec.name}` first"
            )
        self.check_fuse()
        taken: dict[str, int] = {}
        for h in self.hosts.values():
            names = self.spec.role(h.role).dns_names()
            k = taken[h.role] = taken.get(h.role, 0) + 1
            dns = h.dns or (names[k - 1 : k] if names else [])
            self.info[h.name] = NodeInfo(h.name, h.role, _resolve_addr(h.address), h.address, list(dns))
        try:
            self._save()
            self._parallel(self._prepare, list(self.info))
            log(f"source uploaded to {len(self.info)} hosts")
            self._write_hosts()
            self._start_nodes(list(self.info), log)
        except BaseException:
            with contextlib.suppress(Exception):
                self.down()
            raise

    def _prepare(self, node: str) -> None:
        """A host made ready for its node's process: the source, and the disk layers of a run with a disk fault."""
        self.upload_source(node)
        self.mount_disk(node)

    # ------------------------------------------------------------------ the disk layer
    def check_fuse(self) -> None:
        """Refuses a run with a disk fault (UsageError, one line, exit 254) before anything reaches a host
        when a host cannot mount the layer, or when the layer is not built on this machine."""
        if not self.spec.disk_dirs:
            return
        why = disklayer.unavailable(mounts_here=False)
        if why:
            raise UsageError(f"--cluster ssh cannot mount the disk layer: {why}")
        lacking: list[str] = []

        def check(n: str) -> None:
            rc, out, err = self.remote.exec(n, ["sh", "-c", _FUSE_SH], 30)
            if rc != 0:
                lacking.append(f"{n} ({self.hosts[n].address}): {(out or err).strip() or f'exit {rc}'}")

        self._parallel(check, list(self.hosts))
        if lacking:
            raise UsageError(
                f"--cluster ssh cannot mount the disk layer a disk fault needs on {'; '.join(sorted(lacking))}"
            )

    def layer_base(self, node: str) -> str:
        """The folder of the node's disk layers on its host."""
        return posixpath.join(self.node_dir(node), LAYER_DIR)

    def _layers(self, node: str, req: dict[str, Any], timeout: float = 120) -> Any:
        """One layer control request carried out on the host (cluster/layerctl.py sent as `python3 -c`)."""
        source = Path(layerctl.__file__).read_text(encoding="utf-8")
        argv = [self.python(node), "-c", source, json.dumps({"base": self.layer_base(node), **req})]
        rc, out, err = self.remote.exec(node, argv, timeout)
        lines = out.strip().splitlines()
        try:
            answer = json.loads(lines[-1]) if lines else {}
        except ValueError:
            answer = {}
        if rc != 0 or "ok" not in answer:
            why = answer.get("error") or (err.strip().splitlines() or [f"exit {rc}"])[-1]
            raise ClusterError(f"{node}: disk layer {req['op']} failed: {why}")
        return answer["ok"]

    def mount_disk(self, node: str) -> None:
        """The node's disk layers, at its data directories, before its process first starts (a run with a
        disk fault only): the layer binary copied to the host, then one detached layer per directory."""
        dirs = self.disk_layers(node)
        if not dirs:
            return
        program = posixpath.join(self.layer_base(node), layerctl.PROGRAM)
        self.remote.put(node, program, disklayer.binary().read_bytes())
        self.run(node, ["chmod", "755", program], 10, step="chmod the disk layer")
        self._layers(node, {"op": "mount", "binary": program, "mountpoints": dirs})

    def unmount_disk(self, node: str) -> list[str]:
        """Unmounts the node's disk layers and stops them; what is still left (mounts, processes)."""
        if not self.spec.disk_dirs:
            return []
        return [f"{node}: {line}" for line in self._layers(node, {"op": "unmount"})]

    def layer_command(self, node: str, cmd: str) -> dict[str, Any]:
        if not self.disk_layers(node):
            raise ClusterError(f"{node}: no disk layer is mounted (the cluster was brought up without one)")
        return dict(self._layers(node, {"op": "command", "cmd": cmd}))

    def upload_source(self, node: str) -> None:
        """The parts of the `faultline` package a node runs, as a tarball over SFTP, unpacked into
        source_dir (which then holds `faultline/`)."""
        tmp = f"/tmp/faultline-src-{self.spec.name}.tgz"
        self.remote.put(node, tmp, node_tarball())
        src = self.source_dir(node)
        _check_removable(src)
        _check_removable(self.node_dir(node))
        self.run(
            node, ["sh", "-c", _CLAIM_SH, "sh", tmp, src, self.node_dir(node)], 120, step="unpack source"
        )

    def remove_dirs(self, node: str, dirs: Sequence[str]) -> None:
        """Deletes those of `dirs` that Faultline created (they hold MARKER); never any other."""
        for d in dirs:
            _check_removable(d)
        self.run(node, ["sh", "-c", _REMOVE_SH, "sh", *dirs], 60, step="remove directories")

    def _write_hosts(self, remove: bool = False) -> None:
        block = (
            ""
            if remove
            else "\n".join(f"{i.address}\t{n} {' '.join(i.dns)}".rstrip() for n, i in self.info.items())
        )

        def write(n: str) -> None:
            self.run(
                n, [self.python(n), "-c", _HOSTS_PY, HOSTS_BEGIN, HOSTS_END, block], 30, step="/etc/hosts"
            )

        self._parallel(write, list(self.info))

    def _save(self) -> None:
        self._save_state(hosts=[h.__dict__ for h in self.hosts.values()])

    @classmethod
    def attach(cls, name: str) -> SSHBackend:
        data = cls._saved_state(name)
        b = cls(ClusterSpec.from_mapping(data["spec"]), [SSHHost(**h) for h in data["hosts"]])
        b._restore_nodes(data)
        return b

    def down(self) -> None:
        """Stops the daemons, unmounts the disk layers, heals the network, removes the hosts block, the
        data and the source. A host whose layer could not be unmounted keeps its workdir (removing it would
        reach through the mount), and `down` then raises, naming what is left."""
        left: list[str] = []

        def clean(n: str) -> None:
            with contextlib.suppress(Exception):
                self.kill(n)
            try:
                stuck = self.unmount_disk(n)
            except Exception as exc:
                stuck = [f"{n}: {exc}"]
            left.extend(stuck)
            with contextlib.suppress(Exception):
                self.heal_network([n])
            with contextlib.suppress(Exception):
                self.run(n, [self.python(n), "-c", _HOSTS_PY, HOSTS_BEGIN, HOSTS_END, ""], 30)
            with contextlib.suppress(Exception):
                self.remove_dirs(n, [self.source_dir(n)] if stuck else [self.node_dir(n), self.source_dir(n)])

        self._parallel(clean, list(self.info))
        self.remote.close()
        state.remove("ssh", self.spec.name)
        self.remove_hosts_file()
        self.info.clear()
        if left:
            raise ClusterError(
                f"disk layers of cluster {self.spec.name} left behind: {'; '.join(sorted(left))}"
            )

    def destroy(self, node: str) -> None:
        self.kill(node)
        left = self.unmount_disk(node)
        if left:
            raise ClusterError(f"{node}: disk layer left behind: {'; '.join(left)}")
        self.remove_dirs(node, [self.node_dir(node)])
        del self.info[node]
        self._nodes_changed()

    def add_node(self, name: str, role: str | None = None, start: bool = True) -> str:
        """Brings back a host listed in the hosts file (after `destroy`) with empty data."""
        if name in self.info:
            raise ClusterError(f"node {name!r} is already in the cluster")
        if name not in self.hosts:
            raise ClusterError(f"no host {name!r} in the hosts file")
        h = self.hosts[name]
        self.info[name] = NodeInfo(name, role or h.role, _resolve_addr(h.address), h.address, [])
        self._prepare(name)
        self._nodes_changed()
        if start:
            self.start(name)
        return name

    def fetch_dir(self, node: str, remote_dir: str, local_dir: Path) -> None:
        rc, out, err = self.remote.exec_bytes(node, ["tar", "-czf", "-", "-C", remote_dir, "."], 300)
        if rc != 0:
            raise ClusterError(f"{node}: tar {remote_dir} failed: {err.decode(errors='replace').strip()}")
        extract_tar(io.BytesIO(out), local_dir, compressed=True)


def _resolve_addr(address: str) -> str:
    try:
        return socket.gethostbyname(address)
    except OSError:
        return address


SYSTEM_TOPS = ("bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "proc", "sbin", "sys", "usr")


def _check_removable(path: str) -> None:
    """A first guard before the marker check on the host: no relative path, no top-level or system
    directory, no home directory."""
    p = os.path.normpath(path)
    parts = p.strip("/").split("/")
    system = parts[0] in SYSTEM_TOPS and len(parts) <= 2
    home = parts[0] == "home" and len(parts) <= 2
    if not p.startswith("/") or len(parts) < 2 or system or home or p in ("/var/lib", "/opt/local"):
        raise ClusterError(
            f"refusing to delete {path!r}: workdir and source_dir must be dedicated directories"
        )
