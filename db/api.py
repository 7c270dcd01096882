"""The DB protocol: a small core every system under test implements, and capabilities it offers à la carte.

After Jepsen's db.clj, where `DB` is setup and teardown, and `Kill`, `Pause`, `Primary` and `LogFiles` are
separate protocols a DB implements only when it can. The cluster layer brings hosts up and runs whatever
`cluster_spec` says on them (plain data: roles, their processes, the Debian and Python packages they need);
everything else a run asks of the system goes through these methods. `test` is the run's live handles
(faultline.core.Run: `test.backend` is the cluster backend); `node` is a node name of that cluster.

A generic fault asks the DB for what it needs (`Kill.kill`, `Pause.pause`, `Primaries.primaries`) and never
tests which DB it holds; a fault whose capability the DB lacks is refused (exit 254) before anything starts.
What a DB offers beyond the generic faults and workloads (its own nemesis packages, its own workloads) is
declared through the protocols of the layer that uses them: nemesis.api.OffersNemeses and
workloads.api.OffersWorkloads.

db/process.py's ProcessDB implements every capability here for a DB whose nodes each run one process;
docs/your-own-db.md walks through a DB written by a user.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from faultline.cluster.base import ClusterSpec
from faultline.core import Run


@runtime_checkable
class DB(Protocol):
    """A system under test: its cluster, its setup and teardown, and clients."""

    name: str
    # the generic workloads this DB has a client for
    workloads: frozenset[str]
    # the generic faults it can take (None: every one whose capabilities it has)
    nemeses: frozenset[str] | None
    # why a fault is not supported, for the error a user sees ("clock": "etcd is a Go program ...")
    nemesis_notes: Mapping[str, str]

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        """The hosts by role, the process each runs and the packages they need, for the test options
        `opts` (plain data: sizes, injected bugs, ...)."""
        ...

    def validate(self, opts: Mapping[str, Any]) -> None:
        """Refuses options this DB cannot run (raise ValueError with one line)."""
        ...

    def setup(self, test: Run, node: str) -> None:
        """Once the cluster is up, on every node at once: anything beyond starting the role's process, then
        wait until the node serves. Raise db.process.DBStartError (with the tail of its log) when it never
        does: the run stops there, and the cluster is torn down."""
        ...

    def teardown(self, test: Run, node: str) -> None: ...

    def client_nodes(self, test: Run) -> list[str]:
        """The nodes clients talk to, in the order workers are spread over them."""
        ...

    def connector(self, test: Run) -> Callable[[], Any]:
        """A zero-argument callable that returns a connected client library object (for workloads whose
        clients speak the key-value API of workloads/common.py: get, put, cas, scan, create_table)."""
        ...

    def client(self, workload: str) -> Any:
        """The client (workloads.api.Client) for `workload`, or None for the workload's own client, which
        speaks the key-value API through `connector`."""
        ...


@runtime_checkable
class Kill(Protocol):
    """A DB whose processes can be killed (SIGKILL) and started again."""

    def start(self, test: Run, node: str) -> None: ...

    def kill(self, test: Run, node: str) -> None: ...


@runtime_checkable
class Pause(Protocol):
    """A DB whose processes can be paused (SIGSTOP) and resumed."""

    def pause(self, test: Run, node: str) -> None: ...

    def resume(self, test: Run, node: str) -> None: ...


@runtime_checkable
class Primaries(Protocol):
    """A DB that can say which nodes lead now."""

    def primaries(self, test: Run) -> list[str]:
        """The nodes currently leading (empty when none answers)."""
        ...


@runtime_checkable
class Leaders(Protocol):
    """A DB with leaders of several kinds (the store: the leader master, and each tablet's leader), whose
    nodes fall into roles a fault can aim at (`targets`: "masters", "tservers", ...; always "all")."""

    # target name -> the cluster role whose nodes it means
    target_roles: Mapping[str, str]

    def leaders(self, test: Run, targets: str) -> list[str]:
        """The leaders a `leaders` subset of a kill or pause hits within `targets`."""
        ...

    def leader_to_isolate(self, test: Run, targets: str, rng: random.Random) -> str | None:
        """The leader a leader-isolating partition of `targets` cuts off (None: none is known)."""
        ...


@runtime_checkable
class LogFiles(Protocol):
    """A DB whose nodes keep logs worth copying back with the run."""

    def log_files(self, test: Run, node: str) -> list[str]:
        """Paths on the node worth keeping with the run."""
        ...


@runtime_checkable
class DataFiles(Protocol):
    """A DB whose nodes keep their durable state in files, which the disk faults reach (`lose-unfsynced`
    holds writes below `data_dirs` until fsync and can drop them; `file-corrupt` damages `data_files`).

    Plain data by cluster role, written as role templates like a process's argv (`{dir}` is the node's
    directory), so the cluster layer can mount the disk layer before any process starts."""

    # role -> the directories holding that role's durable state (each gets its own disk layer)
    data_dirs: Mapping[str, tuple[str, ...]]
    # role -> glob patterns (inside data_dirs) of the files a file-corrupt fault may damage, most telling
    # first (the write-ahead log before the data files)
    data_files: Mapping[str, tuple[str, ...]]


# The ways nemesis/corruption.py damages a data file, after Jepsen's nemesis/file: flip random bits,
# truncate the tail, zero a range, roll the file back to a copy taken earlier.
FILE_CORRUPTION_KINDS = ("bitflip", "truncate", "zero", "rollback")
# The faults that damage a node's files on purpose (their nemesis names: `file-corrupt`, any kind, and
# `file-<kind>`, one kind; a fault "ran" when a nemesis op `f` equal to the name, or to start-<name>, did not
# fail). A DB's own message that it found such damage is expected under them: the DB did its job.
FILE_CORRUPTION_FAULTS = frozenset({"file-corrupt", *(f"file-{k}" for k in FILE_CORRUPTION_KINDS)})


@dataclass(frozen=True)
class LogPattern:
    """A line in a node's log that means a crash, corrupted data or a broken invariant.

    `regex` is searched (Python `re`) in each line; `expected_under` names the faults under which the line
    is the DB detecting what the fault did (a checksum error after its file was corrupted), not a bug."""

    name: str
    regex: str
    meaning: str
    expected_under: frozenset[str] = frozenset()


@runtime_checkable
class LogPatterns(Protocol):
    """A DB that says which lines in its nodes' logs are bad news (checkers/logs.py reads them)."""

    def log_patterns(self) -> list[LogPattern]: ...


@runtime_checkable
class Bugs(Protocol):
    """A DB with bugs that a test can turn on (`--inject-bug`), to prove the checkers catch them."""

    # bug name -> what it breaks
    bugs: Mapping[str, str]


def capability_names(db: object) -> list[str]:
    """The optional capabilities `db` implements, by protocol name (for messages and docs)."""
    return [
        p.__name__
        for p in (Kill, Pause, Primaries, Leaders, LogFiles, DataFiles, LogPatterns, Bugs)
        if isinstance(db, p)
    ]


class OfferedEntry(Protocol):
    """What `Offers` needs of an entry: a dataclass with the name users type and the DB that offers it."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def name(self) -> str: ...

    @property
    def db(self) -> str | None: ...


Offered = TypeVar("Offered", bound=OfferedEntry)


def with_offers(
    generic: Mapping[str, Offered], offers: Iterable[Mapping[str, Offered]]
) -> dict[str, Offered]:
    """The generic entries (faults or workloads) by name, then each DB's own offers that no earlier one
    names: what help texts and campaign files list."""
    out = dict(generic)
    for offered in offers:
        out.update({k: v for k, v in offered.items() if k not in out})
    return out


@dataclass(frozen=True)
class Offers(Generic[Offered]):
    """A registry of generic entries (faults or workloads: dataclasses with a `name` and the `db` that offers
    them) beside what each DB offers of its own (`own(db)`: its entries, none when it offers none). The
    nemesis and workload registries are each one of these."""

    generic: Mapping[str, Offered]
    own: Callable[[DB], Iterable[Offered]]

    def offered(self, db: DB) -> dict[str, Offered]:
        """What `db` offers of its own, by name, each marked as that DB's."""
        return {e.name: replace(e, db=e.db or db.name) for e in self.own(db)}

    def entries_for(self, db: DB) -> dict[str, Offered]:
        """Every entry a run of `db` may name: the generic ones and the DB's own."""
        return {**self.generic, **self.offered(db)}

    def all_entries(self, dbs: Iterable[DB]) -> dict[str, Offered]:
        """The generic entries and those of every DB in `dbs` (the caller names the DBs)."""
        return with_offers(self.generic, (self.offered(db) for db in dbs))
