"""The admin tools' implementations (argument parsing lives in node/tool/cli.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import grpc

from faultline.node.bugs import Bug, BugSet, UnknownBug
from faultline.node.client import KuduClient, KuduError
from faultline.node.consensus import MemberType, Peer, RaftConfig
from faultline.node.log.cmeta import CmetaCorruption, ConsensusMetadata
from faultline.node.master.catalog import SYS_TABLET
from faultline.node.protos import common_pb2 as cpb
from faultline.node.protos import common_pb2_grpc as cpbg
from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.server.fs import UUID_RE, FsError, FsLayout, format_fs, lock_dir, read_uuid
from faultline.node.server.host import COPYING, RUNNING, end_copy, fetch_copy, install_copy, read_superblock
from faultline.node.server.rpc import ChannelPool, split_addr
from faultline.node.server.storage import ReplicaStorage
from faultline.node.tool import output

RPC_TIMEOUT = 10.0


class UsageProblem(Exception):
    """Arguments that parse but make no sense: usage + exit 254."""


class ToolFailure(Exception):
    """The operation failed: one line, exit 1."""


def _tablet_id(t: str) -> str:
    t = t.strip()
    if t in ("sys", "sys.catalog"):
        return SYS_TABLET
    if not UUID_RE.match(t):
        raise UsageProblem(f"bad tablet id {t!r}: expected 32 hex digits (or 'sys' for the master catalog)")
    return t


def _addr(a: str, what: str = "address") -> str:
    try:
        split_addr(a)
    except ValueError as exc:
        raise UsageProblem(f"{what}: {exc}") from None
    return a


def _masters(s: str) -> list[str]:
    out = [_addr(a.strip(), "MASTERS") for a in s.split(",") if a.strip()]
    if not out:
        raise UsageProblem("MASTERS is empty")
    return out


def _client(args: argparse.Namespace) -> KuduClient:
    return KuduClient(_masters(args.masters), default_timeout_s=RPC_TIMEOUT)


def _list_replicas(
    pool: ChannelPool, addr: str, tablet_id: str = "", timeout: float = 3.0
) -> pb.ListTabletsResponse:
    """ListReplicas on one server (all its replicas, or only `tablet_id`'s); raises grpc.RpcError."""
    return cast(
        pb.ListTabletsResponse,
        pool.call(
            addr,
            pbg.ConsensusStub,
            "ListReplicas",
            pb.ListTabletsRequest(tablet_id=tablet_id),
            timeout=timeout,
        ),
    )


def _wrap(fn):
    try:
        return fn()
    except KuduError as exc:
        raise ToolFailure(str(exc)) from None


# ---------------------------------------------------------------------- fs
def fs_format(args: argparse.Namespace) -> int:
    try:
        u = format_fs(args.fs_dir, args.uuid)
    except FsError as exc:
        raise _fs_problem(exc) from None
    print(u)
    return 0


def _fs_problem(exc: FsError) -> Exception:
    """A bad --fs-dir or --uuid is misuse (254); anything else the directory says is a failure (1)."""
    bad_arg = "invalid uuid" in str(exc) or "is not a directory" in str(exc)
    return UsageProblem(str(exc)) if bad_arg else ToolFailure(str(exc))


def fs_dump_uuid(args: argparse.Namespace) -> int:
    try:
        print(read_uuid(args.fs_dir))
    except FsError as exc:
        raise _fs_problem(exc) from None
    return 0


def _layout(args: argparse.Namespace, write: bool = False) -> tuple[FsLayout, str]:
    """The data directory; with `write`, also its lock, so a running server is never raced."""
    try:
        u = read_uuid(args.fs_dir)
        if write:
            lock_dir(args.fs_dir)  # released when the tool exits
    except FsError as exc:
        raise ToolFailure(str(exc)) from None
    return FsLayout(Path(args.fs_dir)), u


def fs_cut_to_synced(args: argparse.Namespace) -> int:
    """Simulated power loss on a stopped server's directory: every tracked file goes back to what had
    reached fsync (node.log.cut_to_synced). The lock keeps it from cutting files under a live server."""
    from faultline.node.log import cut_to_synced

    _layout(args, write=True)
    try:
        rep = cut_to_synced(args.fs_dir)
    except OSError as exc:
        raise ToolFailure(f"cut_to_synced: {exc}") from None
    if args.json:
        print(
            json.dumps(
                {"truncated": rep.truncated, "deleted": rep.deleted, "restored": rep.restored}, sort_keys=True
            )
        )
        return 0
    for path, n in sorted(rep.truncated.items()):
        print(f"truncated {path} (-{n} bytes)")
    for path in rep.deleted:
        print(f"deleted {path}")
    for path in rep.restored:
        print(f"restored {path}")
    print(
        f"cut_to_synced: {len(rep.truncated)} truncated, {len(rep.deleted)} deleted, "
        f"{len(rep.restored)} restored"
    )
    return 0


# ---------------------------------------------------------------------- local_replica
def local_list(args: argparse.Namespace) -> int:
    layout, _ = _layout(args)
    rows = []
    for tid in layout.tablet_ids():
        sb = read_superblock(layout, tid)
        rows.append(output.LocalReplicaRow(tablet_id=tid, state=sb.state, table=sb.table_name))
    print(output.format_local_replicas(rows, args.json), end="")
    return 0


def _load_cmeta(layout: FsLayout, tid: str) -> ConsensusMetadata:
    try:
        return ConsensusMetadata.load(layout.cmeta(tid))
    except FileNotFoundError:
        raise ToolFailure(f"no consensus metadata for tablet {tid} in {layout.root}") from None
    except CmetaCorruption as exc:
        raise ToolFailure(str(exc)) from None


def cmeta_print_uuids(args: argparse.Namespace) -> int:
    layout, _ = _layout(args)
    cm = _load_cmeta(layout, _tablet_id(args.tablet))
    print(" ".join(p.uuid for p in cm.committed_config.peers))
    return 0


def cmeta_rewrite(args: argparse.Namespace) -> int:
    """Replace the committed config with the given voters (the server must be stopped)."""
    layout, _ = _layout(args, write=True)
    tid = _tablet_id(args.tablet)
    peers = []
    for spec in args.peers:
        u, sep, addr = spec.partition(":")
        if not sep or not UUID_RE.match(u):
            raise UsageProblem(f"bad peer {spec!r}: expected UUID:HOST:PORT with a 32-hex-digit uuid")
        peers.append(Peer(u, _addr(addr, f"peer {spec!r}"), MemberType.VOTER))
    if len({p.uuid for p in peers}) != len(peers):
        raise UsageProblem("a uuid is listed twice")
    cm = _load_cmeta(layout, tid)
    sb = read_superblock(layout, tid)
    storage = ReplicaStorage(layout, tid)
    try:
        state, _snap, _si, _st = storage.load(RaftConfig(()))
    finally:
        storage.close()
    last = max([e.index for e in state.entries] + [state.log_start - 1, cm.committed_config.opid_index])
    new = ConsensusMetadata(cm.term, cm.voted_for, RaftConfig(tuple(peers), last))
    new.save(layout.cmeta(tid), fsync=True)  # atomic: temp file, fsync, rename
    del sb
    print(f"rewrote the config of {tid}: {' '.join(p.uuid for p in peers)} (opid_index {last})")
    return 0


@dataclass(frozen=True)
class _SourceStatus:
    """What one candidate source master says about itself and its catalog replica."""

    addr: str
    uuid: str
    role: str
    term: int
    last_index: int


def _source_status(pool: ChannelPool, addr: str) -> _SourceStatus | None:
    try:
        ping = cast(
            cpb.PingResponse,
            pool.call(addr, cpbg.GenericStub, "Ping", cpb.PingRequest(), timeout=RPC_TIMEOUT),
        )
        resp = _list_replicas(pool, addr, SYS_TABLET, timeout=RPC_TIMEOUT)
    except grpc.RpcError:
        return None
    st = next((r for r in resp.replicas if r.tablet_id == SYS_TABLET), None)
    if st is None:
        return _SourceStatus(addr, ping.server.uuid, "NONE", -1, -1)
    return _SourceStatus(addr, ping.server.uuid, st.role, int(st.term), int(st.last_index))


def _catalog_source(pool: ChannelPool, sources: list[str], careless: bool) -> str:
    """The master to copy the catalog from, among `sources` (KUDU-1556: a copy from a lagging master
    loses committed DDL, so only the current leader will do).

    Given one master, it must be the leader (as its masters see it). Given several, the tool asks each and
    picks the leader of the highest term: a master that still believes it leads an older term (cut off
    from the others) is not a source. When one of them does not answer, that leader must be confirmed by
    a follower in its term (the silent one may know a newer term). With no leader anywhere (e.g.
    migrating from one master), the most advanced replica is all there is, if every source answered.
    `careless` (the copy-from-lagging-master bug) takes the first master that answers, whatever its
    state."""
    if careless:
        for a in sources:
            try:
                pool.call(a, cpbg.GenericStub, "Ping", cpb.PingRequest(), timeout=RPC_TIMEOUT)
                return a
            except grpc.RpcError:
                continue
        return sources[0]
    if len(sources) == 1:
        src = sources[0]
        resp = cast(
            pb.ListMastersResponse,
            pool.call(src, pbg.MasterStub, "ListMasters", pb.ListMastersRequest(), timeout=RPC_TIMEOUT),
        )
        ping = cast(
            cpb.PingResponse, pool.call(src, cpbg.GenericStub, "Ping", cpb.PingRequest(), timeout=RPC_TIMEOUT)
        )
        leader = [m for m in resp.masters if m.role == "LEADER"]
        if not resp.masters:
            raise ToolFailure(f"{src} has no master catalog to copy")
        if leader and leader[0].uuid != ping.server.uuid:
            raise ToolFailure(f"{src} is not the leader master; copy from the leader {leader[0].addr}")
        if not leader:
            # no leader anywhere (e.g. migrating from one master): the source is all there is
            print(f"warning: no leader master is known; copying from {src} as is", file=sys.stderr)
        return src
    answers = {a: _source_status(pool, a) for a in sources}
    silent = [a for a, st in answers.items() if st is None]
    found = [st for st in answers.values() if st is not None and st.term >= 0]
    if not found:
        raise ToolFailure(f"none of {','.join(sources)} answered with a master catalog")
    top = max(s.term for s in found)
    leaders = [s for s in found if s.role == "LEADER" and s.term == top]
    if leaders and (not silent or any(s.term == top and s.role == "FOLLOWER" for s in found)):
        return leaders[0].addr
    if silent:
        # a master that does not answer may be the one that knows a newer term (it and the master being
        # replaced elected a leader while the one in sight was cut off): only a follower in the leader's
        # term rules that out (with three masters, the two of them are a majority, so no newer term exists)
        raise ToolFailure(
            f"{','.join(silent)} did not answer, and no other master confirms "
            f"{'the leader ' + leaders[0].addr if leaders else 'which is the most advanced'}; "
            "retry once every source answers"
        )
    if any(s.role == "LEADER" for s in found):
        raise ToolFailure(
            f"no leader of the current term {top} among {','.join(sources)} (an older leader is "
            "cut off); retry once the masters agree"
        )
    best = max(found, key=lambda s: (s.term, s.last_index))
    print(f"warning: no leader master is known; copying from the most advanced, {best.addr}", file=sys.stderr)
    return best.addr


def _tool_bugs(args: argparse.Namespace) -> BugSet:
    """The bugs this tool run injects: `--inject-bug` and FAULTLINE_INJECT_BUGS (comma or space separated).
    A name that is not a bug is a usage error, so a typo never quietly gives the correct tool."""
    names = [*args.inject_bug, *os.environ.get("FAULTLINE_INJECT_BUGS", "").replace(",", " ").split()]
    try:
        return BugSet(names)
    except UnknownBug as exc:
        raise UsageProblem(str(exc)) from None


def copy_from_remote(args: argparse.Namespace) -> int:
    careless = _tool_bugs(args).enabled(Bug.COPY_FROM_LAGGING_MASTER)
    layout, my_uuid = _layout(args, write=True)
    tid = _tablet_id(args.tablet)
    sources = [_addr(a.strip(), "HOST:PORT") for a in args.source.split(",") if a.strip()]
    if not sources:
        raise UsageProblem("HOST:PORT is empty")
    if layout.superblock(tid).exists():
        sb = read_superblock(layout, tid)
        if sb.state in (RUNNING, COPYING) and layout.cmeta(tid).exists() and sb.state == RUNNING:
            raise ToolFailure(f"tablet {tid} already exists in {layout.root} ({sb.state}); delete it first")
    pool = ChannelPool()
    src = sources[0]
    try:
        if tid == SYS_TABLET:
            src = _catalog_source(pool, sources, careless=careless)
        elif len(sources) > 1:
            raise UsageProblem("several sources are only understood for the master catalog ('sys')")
        print(f"copying tablet {tid} from {src} ...", file=sys.stderr)
        copy = fetch_copy(pool, src, tid, my_uuid, timeout=60.0)
        try:
            install_copy(layout, my_uuid, tid, copy)
        finally:
            end_copy(pool, src, copy.session_id)
    except grpc.RpcError as exc:
        raise ToolFailure(f"copy from {src} failed: {exc.code().name} {exc.details()}") from None
    finally:
        pool.close()
    print(
        f"copied tablet {tid} from {src}: snapshot at index {copy.snapshot_index}, "
        f"{len(copy.log_entries)} log entries"
    )
    return 0


# ---------------------------------------------------------------------- remote_replica
def _server_call(server: str, method: str, request: Any) -> Any:
    """One Consensus RPC to one running server; an RPC failure is the tool's failure, with its code."""
    pool = ChannelPool()
    try:
        return pool.call(_addr(server), pbg.ConsensusStub, method, request, timeout=RPC_TIMEOUT)
    except grpc.RpcError as exc:
        raise ToolFailure(f"{exc.code().name}: {exc.details()}") from None
    finally:
        pool.close()


def remote_list(args: argparse.Namespace) -> int:
    resp = _server_call(args.server, "ListReplicas", pb.ListTabletsRequest())
    rows = [
        output.RemoteReplicaRow(
            tablet_id=r.tablet_id,
            table=r.table_name,
            state=r.state,
            role=r.role,
            term=int(r.term),
            leader_uuid=r.leader_uuid,
            commit_index=int(r.commit_index),
            last_index=int(r.last_index),
            config_index=int(r.committed_config.index),
            voters=[p.uuid for p in r.committed_config.peers if p.voter],
            non_voters=[p.uuid for p in r.committed_config.peers if not p.voter],
        )
        for r in resp.replicas
    ]
    print(output.format_remote_replicas(rows, args.json), end="")
    return 0


def set_flag(args: argparse.Namespace) -> int:
    """Changes a runtime flag of a running master or tablet server (lost when it restarts)."""
    resp = _server_call(args.server, "SetFlag", pb.SetFlagRequest(flag=args.flag, value=args.value))
    print(f"{args.flag}: {resp.old_value} -> {args.value}")
    return 0


def unsafe_change_config(args: argparse.Namespace) -> int:
    tid = _tablet_id(args.tablet)
    for u in args.uuids:
        if not UUID_RE.match(u):
            raise UsageProblem(f"bad uuid {u!r}")
    resp = _server_call(
        args.server, "UnsafeChangeConfig", pb.UnsafeChangeConfigRequest(tablet_id=tid, voter_uuids=args.uuids)
    )
    print(
        f"tablet {tid}: new config {' '.join(p.uuid for p in resp.config.peers)} at index {resp.config.index}"
    )
    return 0


# ---------------------------------------------------------------------- master
def master_list(args: argparse.Namespace) -> int:
    with _client(args) as c:
        resp = _wrap(c.list_masters)
    rows = [output.MasterRow(uuid=m.uuid, addr=m.addr, role=m.role, voter=m.voter) for m in resp.masters]
    print(output.format_master_list(rows, args.json), end="")
    return 0


def _change_masters(args: argparse.Namespace, add: bool, addr: str) -> int:
    with _client(args) as c:
        deadline = time.monotonic() + getattr(args, "timeout", 60.0)
        while True:
            try:
                c._master_call(
                    "ChangeMasters",
                    pb.ChangeMastersRequest(add=add, addr=addr, uuid=args.uuid),
                    time.monotonic() + 20,
                    True,
                )
                break
            except KuduError as exc:
                if time.monotonic() > deadline or (
                    "STEPPING_DOWN" not in str(exc) and "PENDING" not in str(exc)
                ):
                    raise ToolFailure(str(exc)) from None
                time.sleep(0.5)
        if add:
            print(
                f"added {addr} as a non-voter; waiting for it to copy the catalog and be promoted ...",
                file=sys.stderr,
            )
            while time.monotonic() < deadline:
                try:
                    ms = c.list_masters(timeout=5)
                    if any(m.addr == addr and m.voter for m in ms.masters):
                        print(f"master {addr} is a voter")
                        return 0
                except KuduError:
                    pass
                time.sleep(0.5)
            raise ToolFailure(f"master {addr} was added but not promoted within {args.timeout:.0f}s")
        print(f"removed master {addr}")
        return 0


def master_add(args: argparse.Namespace) -> int:
    return _change_masters(args, True, _addr(args.new, "new master"))


def master_remove(args: argparse.Namespace) -> int:
    return _change_masters(args, False, _addr(args.old, "old master"))


# ---------------------------------------------------------------------- tablet
def _find_tablet(c: KuduClient, tid: str) -> pb.TabletLocation:
    for name in _wrap(c.list_tables):
        locs = _wrap(lambda name=name: c.table_locations(name))
        for t in locs.tablets:
            if t.tablet_id == tid:
                return t
    raise ToolFailure(f"tablet {tid} not found in any table")


def _leader_status(c: KuduClient, tid: str, deadline: float) -> tuple[str, pb.ReplicaStatus]:
    """Ask every replica; return (addr, status) of the one that is leader."""
    while True:
        loc = _find_tablet(c, tid)
        for r in loc.replicas:
            try:
                resp = _list_replicas(c.pool, r.addr, tid)
            except grpc.RpcError:
                continue
            for st in resp.replicas:
                if st.role == "LEADER":
                    return r.addr, st
        if time.monotonic() > deadline:
            raise ToolFailure(f"tablet {tid} has no leader")
        time.sleep(0.3)


def _tserver(c: KuduClient, uuid: str) -> pb.TServerInfo:
    for s in _wrap(c.list_tservers).servers:
        if s.uuid == uuid:
            return s
    raise ToolFailure(f"tablet server {uuid} is not known to the masters")


def _change(
    c: KuduClient, tid: str, typ: pb.ChangeConfigRequest.Type, peer: pb.RaftPeer, timeout: float = 30.0
) -> int:
    deadline = time.monotonic() + timeout
    while True:
        addr, st = _leader_status(c, tid, deadline)
        try:
            req = pb.ChangeConfigRequest(
                tablet_id=tid, type=typ, peer=peer, cas_config_index=st.committed_config.index
            )
            resp = cast(
                pb.ChangeConfigResponse,
                c.pool.call(addr, pbg.ConsensusStub, "ChangeConfig", req, timeout=15.0),
            )
            return resp.config_index
        except grpc.RpcError as exc:
            d = exc.details() or ""
            if time.monotonic() > deadline or not any(
                s in d for s in ("NOT_LEADER", "PENDING", "NOT_READY", "CAS_FAILED", "TRANSFER")
            ):
                raise ToolFailure(f"{exc.code().name}: {d}") from None
            time.sleep(0.5)


def add_replica(args: argparse.Namespace) -> int:
    tid = _tablet_id(args.tablet)
    with _client(args) as c:
        ts = _tserver(c, args.ts)
        voter = args.replica_type == "VOTER"
        # a VOTER joins as a promotable NON_VOTER first, so it cannot weaken the majority while copying
        idx = _change(
            c,
            tid,
            pb.ChangeConfigRequest.ADD_PEER,
            pb.RaftPeer(uuid=ts.uuid, addr=ts.addr, voter=False, promote=voter),
        )
        print(
            f"added {ts.uuid} to {tid} as {'a promotable NON_VOTER' if voter else 'NON_VOTER'} (config index {idx})"
        )
        return 0


def remove_replica(args: argparse.Namespace) -> int:
    tid = _tablet_id(args.tablet)
    with _client(args) as c:
        idx = _change(c, tid, pb.ChangeConfigRequest.REMOVE_PEER, pb.RaftPeer(uuid=args.ts))
        print(f"removed {args.ts} from {tid} (config index {idx})")
        return 0


def move_replica(args: argparse.Namespace) -> int:
    tid = _tablet_id(args.tablet)
    deadline = time.monotonic() + args.timeout
    with _client(args) as c:
        ts = _tserver(c, args.dst)
        _change(
            c,
            tid,
            pb.ChangeConfigRequest.ADD_PEER,
            pb.RaftPeer(uuid=ts.uuid, addr=ts.addr, voter=False, promote=True),
        )
        print(f"added {ts.uuid}; waiting for it to catch up and be promoted ...", file=sys.stderr)
        while True:
            _, st = _leader_status(c, tid, deadline)
            if any(p.uuid == ts.uuid and p.voter for p in st.committed_config.peers):
                break
            if time.monotonic() > deadline:
                raise ToolFailure(f"{ts.uuid} was not promoted within {args.timeout:.0f}s")
            time.sleep(0.3)
        _change(
            c,
            tid,
            pb.ChangeConfigRequest.REMOVE_PEER,
            pb.RaftPeer(uuid=args.src),
            timeout=max(5.0, deadline - time.monotonic()),
        )
        print(f"moved the replica of {tid} from {args.src} to {ts.uuid}")
        return 0


def leader_step_down(args: argparse.Namespace) -> int:
    tid = _tablet_id(args.tablet)
    with _client(args) as c:
        if tid == SYS_TABLET:  # the masters' own Raft group
            lead = [m for m in _wrap(c.list_masters).masters if m.role == "LEADER"]
            if not lead:
                raise ToolFailure("no leader master")
            addr = lead[0].addr
        else:
            addr, _ = _leader_status(c, tid, time.monotonic() + RPC_TIMEOUT)
        try:
            c.pool.call(
                addr,
                pbg.ConsensusStub,
                "LeaderStepDown",
                pb.LeaderStepDownRequest(tablet_id=tid, new_leader_uuid=args.new_leader, abrupt=args.abrupt),
                timeout=RPC_TIMEOUT,
            )
        except grpc.RpcError as exc:
            raise ToolFailure(f"{exc.code().name}: {exc.details()}") from None
        print(f"leader of {tid} at {addr} is stepping down")
        return 0


# ---------------------------------------------------------------------- table
def table_create(args: argparse.Namespace) -> int:
    with _client(args) as c:
        tid = _wrap(lambda: c.create_table(args.name, args.num_tablets, args.replication, timeout=60.0))
        print(tid)
        return 0


def table_delete(args: argparse.Namespace) -> int:
    with _client(args) as c:
        _wrap(lambda: c.delete_table(args.name))
        print(f"deleted {args.name}")
        return 0


def table_list(args: argparse.Namespace) -> int:
    with _client(args) as c:
        tables = []
        for name in _wrap(c.list_tables):
            row = output.TableRow(name=name)
            if args.tablets:
                row["tablets"] = [
                    output.TabletRow(
                        tablet_id=t.tablet_id,
                        partition=int(t.partition),
                        state=t.state,
                        replicas=[
                            output.ReplicaRow(uuid=r.uuid, addr=r.addr, role=r.role, voter=r.voter)
                            for r in t.replicas
                        ],
                    )
                    for t in _wrap(lambda name=name: c.table_locations(name)).tablets
                ]
            tables.append(row)
    print(output.format_table_list(tables, args.json), end="")
    return 0


# ---------------------------------------------------------------------- ksck
def ksck_report(masters: list[str], rounds: int = 3) -> dict[str, Any]:
    """Check the cluster; returns {"healthy": bool, "problems": [...], "tablets": n, ...}."""
    with KuduClient(masters, default_timeout_s=RPC_TIMEOUT) as c:
        for attempt in range(rounds):
            rep = _ksck_once(c, masters)
            if rep["healthy"] or attempt == rounds - 1:
                return rep
            time.sleep(1.0)
        return rep


def _ksck_masters(c: KuduClient, masters: list[str], out: dict[str, Any], problems: list[str]) -> None:
    leaders: set[str] = set()
    for a in masters:
        try:
            mresp = cast(
                pb.ListMastersResponse,
                c.pool.call(a, pbg.MasterStub, "ListMasters", pb.ListMastersRequest(), timeout=5.0),
            )
            out["masters"].append({"addr": a, "config": [(m.uuid, m.addr, m.role) for m in mresp.masters]})
            leaders.update(m.uuid for m in mresp.masters if m.role == "LEADER")
        except grpc.RpcError as exc:
            problems.append(f"master {a} unreachable: {exc.code().name}")
    if len(leaders) != 1:
        problems.append(f"masters do not agree on one leader: {sorted(leaders)}")


def _poll_replica(c: KuduClient, r: Any, tablet_id: str, statuses: dict[str, pb.ReplicaStatus]) -> None:
    """Record replica `r`'s status if it answers and runs; an unreachable replica stays unrecorded."""
    try:
        resp = _list_replicas(c.pool, r.addr, tablet_id)
        for st in resp.replicas:
            if st.state == "RUNNING":
                statuses[r.uuid] = st
    except grpc.RpcError:
        pass


def _await_laggards(c: KuduClient, t: Any, statuses: dict[str, pb.ReplicaStatus], lead: str) -> None:
    """Followers learn the commit index with the next append: give laggards a moment."""
    lst = statuses[lead]
    for _ in range(6):
        behind = [
            r
            for r in t.replicas
            if r.uuid in statuses and r.uuid != lead and statuses[r.uuid].commit_index < lst.commit_index
        ]
        if not behind:
            break
        time.sleep(0.3)
        for r in behind:
            _poll_replica(c, r, t.tablet_id, statuses)


def _ksck_leader_agreement(
    where: str, t: Any, statuses: dict[str, pb.ReplicaStatus], lead: str, problems: list[str]
) -> None:
    lst = statuses[lead]
    for u, st in statuses.items():
        if st.committed_config.SerializeToString() != lst.committed_config.SerializeToString():
            problems.append(
                f"{where}: replica {u} has config index {st.committed_config.index}, "
                f"leader has {lst.committed_config.index}"
            )
        if st.commit_index < lst.commit_index:
            problems.append(
                f"{where}: replica {u} committed index {st.commit_index} < leader's {lst.commit_index}"
            )
    if not any(r.role == "LEADER" and r.uuid == lead for r in t.replicas):
        problems.append(f"{where}: the leader master does not know its leader {lead} (tablet report missing)")
    if {p.uuid for p in lst.committed_config.peers} != {r.uuid for r in t.replicas}:
        problems.append(f"{where}: master's config differs from the leader's")
    if lst.failed_peers:
        problems.append(f"{where}: leader reports failed peers {list(lst.failed_peers)}")


def _ksck_tablet(c: KuduClient, name: str, rf: int, t: Any, problems: list[str]) -> None:
    where = f"table {name} tablet {t.tablet_id}"
    statuses: dict[str, pb.ReplicaStatus] = {}
    for r in t.replicas:
        _poll_replica(c, r, t.tablet_id, statuses)
    voters = [r for r in t.replicas if r.voter]
    if t.state != "RUNNING":
        problems.append(f"{where}: state {t.state}")
    if len(voters) < rf:
        problems.append(f"{where}: under-replicated ({len(voters)} voters, replication {rf})")
    missing = [r.uuid for r in voters if r.uuid not in statuses]
    if missing:
        problems.append(f"{where}: replicas not running: {missing}")
    lead = [u for u, st in statuses.items() if st.role == "LEADER"]
    if len(lead) != 1:
        problems.append(f"{where}: {len(lead)} leaders")
        return
    _await_laggards(c, t, statuses, lead[0])
    _ksck_leader_agreement(where, t, statuses, lead[0], problems)


def _ksck_orphans(c: KuduClient, servers: Any, table_names: Any, problems: list[str]) -> None:
    """Replicas still running on live servers for tablets no table knows."""
    known: set[str] = set()
    for name in table_names:
        try:
            known.update(t.tablet_id for t in c.table_locations(name).tablets)
        except KuduError:
            pass
    for s in servers:
        if not s.live:
            continue
        try:
            resp = _list_replicas(c.pool, s.addr)
        except grpc.RpcError:
            continue
        for st in resp.replicas:
            if st.state == "RUNNING" and st.tablet_id not in known:
                problems.append(
                    f"tablet server {s.uuid} still runs a replica of {st.tablet_id}, which belongs "
                    f"to no live table (deleted, or never recorded)"
                )


def _ksck_once(c: KuduClient, masters: list[str]) -> dict[str, Any]:
    problems: list[str] = []
    out: dict[str, Any] = {"masters": [], "tservers": [], "tables": {}}
    _ksck_masters(c, masters, out, problems)
    try:
        servers = c.list_tservers().servers
        tables = c.list_tables()
    except KuduError as exc:
        problems.append(f"cannot query the leader master: {exc}")
        return {"healthy": False, "problems": problems, **out}
    live = {s.uuid: s for s in servers if s.live}
    out["tservers"] = [{"uuid": s.uuid, "addr": s.addr, "live": s.live} for s in servers]
    members: set[str] = set()
    ntablets = 0
    for name in tables:
        try:
            locs = c.table_locations(name)
        except KuduError as exc:
            problems.append(f"table {name}: {exc}")
            continue
        out["tables"][name] = len(locs.tablets)
        for t in locs.tablets:
            ntablets += 1
            members.update(r.uuid for r in t.replicas)
            _ksck_tablet(c, name, locs.table.replication, t, problems)
    _ksck_orphans(c, servers, out["tables"], problems)
    for s in servers:
        if not s.live and s.uuid in members:
            problems.append(f"tablet server {s.uuid} ({s.addr}) hosts replicas but is not heartbeating")
    out.update(
        {"healthy": not problems, "problems": problems, "tablets": ntablets, "live_tservers": len(live)}
    )
    return out


def ksck(args: argparse.Namespace) -> int:
    rep = ksck_report(_masters(args.masters))
    if args.json:
        print(json.dumps(rep, indent=2, default=str))
    else:
        for p in rep["problems"]:
            print(f"WARNING: {p}")
        print(
            f"{len(rep.get('tables', {}))} tables, {rep.get('tablets', 0)} tablets, "
            f"{rep.get('live_tservers', 0)} live tablet servers, {len(rep['masters'])} masters"
        )
        print("OK" if rep["healthy"] else "UNHEALTHY")
    return 0 if rep["healthy"] else 1


__all__ = ["ToolFailure", "UsageProblem", "ksck_report"]
