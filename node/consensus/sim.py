"""Deterministic simulation of a Raft group under faults, with Raft's invariants checked after every step.

The simulated world: replicas of `RaftCore`, a network whose connectivity is a networkx graph (partitions
of several shapes), message loss, duplication, delay and reordering, crashes and restarts that keep only
what the replica had persisted, client proposals and reads, membership changes and leadership transfers.
Everything random comes from one `random.Random(seed)`, so a seed replays exactly.

Checked after every step (or at the moment the fact appears):
  election safety     at most one leader per term
  log matching        two logs with an entry of the same index and term agree on it and on all before it
                      (checked by induction: same (index, term) implies same content and same previous term)
  leader completeness a new leader holds every entry committed so far
  state machine       no two replicas commit or apply different entries at the same index
  commit monotonic    a replica's commit index never goes back (within one run of the process)
  one pending change  a leader never has two uncommitted config entries
  voters only         when a leader commits index i, a majority of the VOTERs of its config hold (i, term)
  no disruption       a leader linked to a majority of voters, with no loss and no restarts, transfers,
                      step-downs or config changes for a while, is never deposed (vote withholding)
  read index          a read is answered at an index >= everything committed when it was requested
Liveness: after the faults stop and the network heals, a leader is elected and a proposal commits within
a bounded number of ticks.

With `SimOptions(snapshots=True)` (`faultline sim --snapshots`) servers also compact their logs at random
(as WAL garbage collection does, below what they applied) and leaders send InstallSnapshot to a follower
behind their log's start; a persisted log then starts after its snapshot, and the checks count an entry
inside a snapshot as held (a snapshot holds committed entries only).
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field

from faultline.node.bugs import BugSet
from faultline.node.consensus.core import ConsensusInvariantError, RaftCore
from faultline.node.consensus.types import (
    AppendRequest,
    ChangeType,
    ConfigChange,
    Entry,
    EntryType,
    EventKind,
    HardState,
    MemberType,
    Message,
    Options,
    Peer,
    PersistentState,
    RaftConfig,
    RaftError,
    Ready,
    Role,
    VoteResponse,
)

ELECTION_TICKS = 10
HEARTBEAT_TICKS = 2


class Violation(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass
class SimOptions:
    nodes: int = 5  # servers (all VOTERs) at the start; membership changes add and remove more
    steps: int = 250  # ticks of faults before the heal
    liveness_ticks: int = 400  # bound for electing a leader and committing after the heal
    bugs: frozenset[str] = frozenset()  # names or members of node.bugs.Bug; held as a BugSet
    trace_lines: int = 40
    snapshots: bool = False  # compact logs at random; leaders catch followers up by InstallSnapshot

    def __post_init__(self) -> None:
        self.bugs = BugSet(self.bugs)  # an unknown name fails here rather than never firing


@dataclass
class SimResult:
    seed: int
    ok: bool
    violation: str | None = None
    kind: str | None = None
    trace: list[str] = field(default_factory=list)
    ticks: int = 0
    messages: int = 0
    commits: int = 0
    elections: int = 0
    snapshots: int = 0  # InstallSnapshot messages a follower took (SimOptions.snapshots)


@dataclass
class _Profile:
    """Per-seed fault intensities, so different seeds stress different corners."""

    p_partition: float
    p_heal: float
    p_crash: float
    p_restart: float
    p_propose: float
    p_config: float
    p_transfer: float
    p_step_down: float
    p_read: float
    p_lossy: float
    loss: float
    dup: float
    max_delay: int
    max_batch: int
    p_isolate_new_leader: float  # partition a freshly elected leader away (a leader-targeted nemesis)
    p_bounce: float  # kill and restart a server at once

    @staticmethod
    def draw(rng: random.Random) -> _Profile:
        return _Profile(
            p_partition=rng.choice([0.01, 0.03, 0.06, 0.12]),
            p_heal=rng.choice([0.02, 0.05, 0.1]),
            p_crash=rng.choice([0.0, 0.01, 0.03, 0.06, 0.12]),
            p_restart=rng.choice([0.05, 0.1, 0.3, 0.5]),
            p_propose=rng.choice([0.0, 0.02, 0.1, 0.3, 0.6]),
            p_config=rng.choice([0.0, 0.02, 0.05]),
            p_transfer=rng.choice([0.0, 0.01, 0.03]),
            p_step_down=rng.choice([0.0, 0.005, 0.02]),
            p_read=rng.choice([0.0, 0.05, 0.1]),
            p_lossy=rng.choice([0.0, 0.01, 0.03]),
            loss=rng.choice([0.05, 0.2, 0.4]),
            dup=rng.choice([0.0, 0.05, 0.2]),
            max_delay=rng.choice([1, 2, 3]),
            max_batch=rng.choice([1, 1, 1, 2, 3, 8]),
            p_isolate_new_leader=rng.choice([0.0, 0.5, 0.8]),
            p_bounce=rng.choice([0.0, 0.02, 0.05]),
        )


class _Server:
    def __init__(self, uuid: str, config: RaftConfig) -> None:
        self.uuid = uuid
        self.hs = HardState()
        self.config = config  # persisted committed config (cmeta)
        self.log: list[Entry] = []  # persisted WAL, from log_start
        self.log_start = 1
        self.prev_term = 0  # term of the entry at log_start - 1
        self.snap_index = 0  # the persisted snapshot holds the state machine up to here
        self.core: RaftCore | None = None
        self.destroyed = False
        self.seen_commit = 0  # per process run

    def last(self) -> tuple[int, int]:
        """(term, index) of the persisted log's last entry, the snapshot's when the log is empty."""
        return (self.log[-1].term, self.log[-1].index) if self.log else (self.prev_term, self.log_start - 1)

    def holds(self, index: int, term: int | None) -> bool:
        """Whether the persisted state holds entry (index, term): in the log, or inside the snapshot."""
        if index < self.log_start:
            return index <= self.snap_index
        return index <= self.last()[1] and self.log[index - self.log_start].term == term


class Simulation:
    def __init__(self, seed: int, opts: SimOptions | None = None) -> None:
        import networkx as nx

        self.nx = nx
        self.seed = seed
        self.opts = opts or SimOptions()
        self.rng = random.Random(seed)
        self.profile = _Profile.draw(self.rng)
        # drawn only with snapshots on, so the runs without them replay as before
        self.p_compact = self.rng.choice([0.02, 0.05, 0.1]) if self.opts.snapshots else 0.0
        self.now = 0
        self.trace: deque[str] = deque(maxlen=self.opts.trace_lines)
        n = max(1, self.opts.nodes)
        uuids = [f"n{i}" for i in range(1, n + 1)]
        voters = uuids
        initial = RaftConfig(tuple(Peer(u, f"{u}:7050") for u in voters))
        self.servers: dict[str, _Server] = {}
        for u in uuids:
            self.servers[u] = _Server(u, initial if u in voters else RaftConfig(()))
        self._next_uuid = n + 1
        self.graph = nx.complete_graph(uuids)
        self.edge_since: dict[tuple[str, str], int] = {}  # when each link last came up
        self.node_since: dict[str, int] = dict.fromkeys(uuids, 0)  # when each server last (re)started
        self.inflight: list[tuple[int, float, int, Message]] = []
        self._msg_counter = 0
        self.lossy = False
        # checker state
        self.leaders: dict[int, str] = {}
        self.votes: dict[tuple[str, int], str] = {}
        self._isolate_next: str | None = None
        self.quiet = False
        self._rejoin: list[tuple[int, str]] = []  # (tick, server) to reconnect after a leader isolation
        self.entry_key: dict[tuple[int, int], tuple] = {}
        self.committed: dict[int, tuple[int, tuple]] = {}
        self.max_committed = 0
        self.applied: dict[int, tuple[int, tuple]] = {}
        self.reads: dict[object, int] = {}
        self._read_counter = 0
        self._payload_counter = 0
        self.stable_since = 0
        self._stable_linked: list[str] = []
        self.pending_moves: list[tuple[str, str]] = []  # (added, to remove once added is committed)
        self.result = SimResult(seed, True)
        for u in uuids:
            self._start(self.servers[u])
        self._log(f"start: servers {uuids}, voters {voters}, profile {self.profile}")

    # ------------------------------------------------------------ plumbing
    def _log(self, line: str) -> None:
        self.trace.append(f"t={self.now:4d} {line}")

    def _start(self, s: _Server) -> None:
        opts = Options(
            election_ticks=ELECTION_TICKS,
            heartbeat_ticks=HEARTBEAT_TICKS,
            max_batch_entries=self.profile.max_batch,
            promote_lag_entries=2,
            failed_after_ticks=5 * ELECTION_TICKS,
            bugs=self.opts.bugs,
            install_snapshots=self.opts.snapshots,
        )
        state = PersistentState(s.hs, s.config, tuple(s.log), s.log_start, s.prev_term, s.snap_index)
        s.core = RaftCore(s.uuid, state, opts, random.Random(self.rng.getrandbits(32)))
        s.seen_commit = 0

    def _set_graph(self, g) -> None:
        """Replace the connectivity graph, remembering when each link came up."""
        for a, b in g.edges:
            key = (a, b) if a < b else (b, a)
            if not self.graph.has_edge(a, b):
                self.edge_since[key] = self.now
        self.graph = g

    def _link_age(self, a: str, b: str) -> int:
        if not self.graph.has_edge(a, b):
            return -1
        return self.now - self.edge_since.get((a, b) if a < b else (b, a), 0)

    def _connected(self, a: str, b: str) -> bool:
        return a == b or self.graph.has_edge(a, b)

    def _send(self, m: Message) -> None:
        self.result.messages += 1
        if isinstance(m, VoteResponse) and m.granted and not m.pre_vote:
            other = self.votes.setdefault((m.src, m.term), m.dst)
            if other != m.dst:
                raise Violation("vote-once", f"{m.src} voted for {other} and for {m.dst} in term {m.term}")
        if not self._connected(m.src, m.dst):
            return
        if self.lossy and self.rng.random() < self.profile.loss:
            return
        copies = 2 if self.lossy and self.rng.random() < self.profile.dup else 1
        for _ in range(copies):
            self._msg_counter += 1
            at = self.now + self.rng.randint(1, self.profile.max_delay)
            heapq.heappush(self.inflight, (at, self.rng.random(), self._msg_counter, m))

    def _process(self, s: _Server) -> None:
        core = s.core
        assert core is not None
        for _ in range(100):
            if not core.has_ready():
                return
            r = core.ready()
            self._persist(s, r)
            for m in r.messages:
                self._send(m)
            self._check_commit(s, r)
            self._apply(s, r)
            for rs in r.read_states:
                bound = self.reads.pop(rs.ctx, None)
                if rs.ok and bound is not None and rs.index < bound:
                    raise Violation(
                        "read-index",
                        f"{s.uuid} answered a read at index {rs.index}, but index "
                        f"{bound} was committed before the read was requested",
                    )
            for ev in r.events:
                self._on_event(s, ev)
            core.advance(r)
        raise AssertionError("ready loop did not settle")

    def _persist(self, s: _Server, r: Ready) -> None:
        if r.snapshot is not None:
            s.log, s.log_start, s.prev_term = [], r.snapshot.index + 1, r.snapshot.term
            s.snap_index = r.snapshot.index
            self.result.snapshots += 1
            self._log(f"{s.uuid} installed a snapshot at {r.snapshot.index}")
        if r.truncate_from is not None:
            del s.log[max(0, r.truncate_from - s.log_start) :]
        for e in r.entries:
            prev_term, last = s.last()
            if e.index != last + 1:
                raise Violation("wal", f"{s.uuid} appended index {e.index} after {last}")
            key = (e.type, e.payload, e.config, prev_term)
            old = self.entry_key.setdefault((e.index, e.term), key)
            if old != key:
                raise Violation(
                    "log-matching",
                    f"{s.uuid} holds entry ({e.index}, term {e.term}) that differs "
                    "from another replica's entry with the same index and term",
                )
            s.log.append(e)
        if r.hard_state is not None:
            s.hs = r.hard_state
        if r.committed_config is not None:
            s.config = r.committed_config

    def _check_commit(self, s: _Server, r: Ready) -> None:
        core = s.core
        assert core is not None
        c = r.commit_index
        if c < s.seen_commit:
            raise Violation(
                "commit-monotonic", f"{s.uuid} commit index went back from {s.seen_commit} to {c}"
            )
        if c == s.seen_commit:
            return
        for i in range(s.seen_commit + 1, c + 1):
            t = core.term_at(i)
            if t is None or i < core.log_start:
                continue
            e = core.entry(i)
            key = (e.type, e.payload, e.config)
            old = self.committed.setdefault(i, (t, key))
            if old != (t, key):
                raise Violation(
                    "state-machine-safety",
                    f"{s.uuid} committed ({i}, term {t}) but ({i}, term {old[0]}) was committed before",
                )
        self.max_committed = max(self.max_committed, c)
        if core.role == Role.LEADER:
            t = core.term_at(c)
            holders = [v for v in core.config.voters() if self.servers[v].holds(c, t)]
            if len(holders) < core.config.majority():
                raise Violation(
                    "voters-only",
                    f"leader {s.uuid} committed index {c} held by voters {holders} "
                    f"only; its config's voters are {core.config.voters()}",
                )
            self._check_electable(s.uuid, core.config, c, t)
        self.result.commits += c - s.seen_commit
        s.seen_commit = c

    def _check_electable(self, leader: str, config: RaftConfig, index: int, term: int | None) -> None:
        """A committed entry must be in every log that could still win an election (Raft's safety
        argument, checked on the persisted logs): a voter without it must be less up to date than a
        majority of the voters."""
        voters = config.voters()
        for x in voters:
            if self.servers[x].holds(index, term):
                continue
            mine = self.servers[x].last()
            supporters = [v for v in voters if self.servers[v].last() <= mine]
            if len(supporters) >= config.majority():
                raise Violation(
                    "committed-not-durable",
                    f"leader {leader} committed ({index}, term {term}) but "
                    f"{x}, whose log lacks it, could win an election with votes of {supporters}",
                )

    def _apply(self, s: _Server, r: Ready) -> None:
        for e in r.committed_entries:
            key = (e.term, (e.type, e.payload, e.config))
            old = self.applied.setdefault(e.index, key)
            if old != key:
                raise Violation(
                    "state-machine-safety",
                    f"{s.uuid} applied ({e.index}, term {e.term}) but another "
                    f"replica applied ({e.index}, term {old[0]})",
                )
            if e.payload == self._live_payload:
                self._live_done = True

    _live_payload = b"\x00liveness"
    _live_done = False

    def _on_event(self, s: _Server, ev) -> None:
        core = s.core
        assert core is not None
        if ev.kind == EventKind.BECAME_LEADER:
            self.result.elections += 1
            other = self.leaders.setdefault(ev.term, s.uuid)
            if other != s.uuid:
                raise Violation("election-safety", f"{s.uuid} and {other} are both leaders of term {ev.term}")
            for i in range(core.log_start, self.max_committed + 1):  # below it: the snapshot, all committed
                want = self.committed.get(i)
                if want is not None and core.term_at(i) != want[0]:
                    raise Violation(
                        "leader-completeness",
                        f"new leader {s.uuid} (term {ev.term}) lacks committed "
                        f"entry ({i}, term {want[0]}); it has term {core.term_at(i)}",
                    )
            self._log(f"{s.uuid} leader of term {ev.term} (last index {core.last_index()})")
            self.stable_since = self.now
            if self.rng.random() < self.profile.p_isolate_new_leader:
                self._isolate_next = s.uuid
        elif ev.kind in (EventKind.CONFIG_COMMITTED, EventKind.TRANSFER_STARTED, EventKind.LOST_LEADERSHIP):
            self._log(
                f"{s.uuid}: {ev.kind.value} {ev.detail}"
                + (f" voters={ev.config.voters()}" if ev.config else "")
            )
        if ev.kind in (EventKind.CONFIG_CHANGED, EventKind.TRANSFER_STARTED, EventKind.LOST_LEADERSHIP):
            self.stable_since = self.now

    # ------------------------------------------------------------ checks
    def _check_step(self) -> None:
        for s in self.servers.values():
            core = s.core
            if core is None or core.role != Role.LEADER:
                continue
            # config entries not committed anywhere yet (a restarted leader may not know that older ones were)
            pending = [
                e.index
                for e in core.entries_from(core.committed_config.opid_index + 1, core.last_index())
                if e.type == EntryType.CONFIG and self.committed.get(e.index, (None,))[0] != e.term
            ]
            if len(pending) > 1:
                raise Violation(
                    "one-pending-change", f"leader {s.uuid} has config entries {pending} uncommitted"
                )

    def _top_term(self) -> int:
        return max(x.core.term for x in self.servers.values() if x.core is not None) if self._live() else 0

    def _stable_leader(self) -> tuple[str, int] | None:
        """The leader that vote withholding must protect right now, if any: it leads the highest term and
        a majority of its voters have been up and linked to it long enough to have heard its heartbeats;
        no loss, transfer, step-down or config change happened recently."""
        settle = 2 * HEARTBEAT_TICKS + 3 * self.profile.max_delay + 1
        if self.now - self.stable_since < settle:
            return None
        leaders = self._leaders()
        if not leaders:
            return None
        leader = max(leaders, key=lambda x: x.core.term)  # type: ignore[union-attr]
        core = leader.core
        assert core is not None
        if core.transfer_target() is not None:
            self.stable_since = self.now  # a transfer deposes the leader on purpose
            return None
        if core.term < self._top_term() or not core.config.is_voter(leader.uuid):
            return None
        linked = [
            v
            for v in core.config.voters()
            if v == leader.uuid
            or (
                self.servers[v].core is not None
                and self._link_age(leader.uuid, v) >= settle
                and self.now - self.node_since[v] >= settle
            )
        ]
        if len(linked) < core.config.majority():
            return None
        self._stable_linked = linked
        return leader.uuid, core.term

    def _check_disruption(self, before: tuple[str, int] | None) -> None:
        if before is None:
            return
        top = self._top_term()
        if top > before[1]:
            raise Violation(
                "disruption",
                f"leader {before[0]} of term {before[1]} was heard by voters "
                f"{self._stable_linked} (a majority) over a reliable network, yet an election for term "
                f"{top} took place (votes were not withheld)",
            )

    def _unstable(self) -> None:
        self.stable_since = self.now

    # ------------------------------------------------------------ faults and client operations
    def _live(self) -> list[_Server]:
        return [s for s in self.servers.values() if s.core is not None]

    def _leaders(self) -> list[_Server]:
        return [s for s in self._live() if s.core is not None and s.core.role == Role.LEADER]

    def _members(self) -> list[str]:
        return [u for u, s in self.servers.items() if not s.destroyed]

    def _partition(self) -> None:
        nx = self.nx
        members = self._members()
        leaders = self._leaders()
        rng = self.rng
        shape = rng.choice(["split", "isolate-leader", "isolate-one", "bridge", "ring", "cut-link", "random"])
        g = nx.Graph()
        g.add_nodes_from(self.servers)
        if shape == "split" or (shape == "bridge" and len(members) < 3):
            side = rng.sample(members, rng.randint(1, max(1, len(members) - 1)))
            other = [m for m in members if m not in side]
            g.add_edges_from((a, b) for grp in (side, other) for a in grp for b in grp if a < b)
        elif shape in ("isolate-leader", "isolate-one"):
            victim = leaders[0].uuid if (shape == "isolate-leader" and leaders) else rng.choice(members)
            rest = [m for m in members if m != victim]
            g.add_edges_from((a, b) for a in rest for b in rest if a < b)
        elif shape == "bridge":
            order = rng.sample(members, len(members))
            bridge, half = order[0], (len(order) - 1) // 2 + 1
            for grp in (order[1:half], order[half:]):
                ext = [*grp, bridge]
                g.add_edges_from((a, b) for a in ext for b in ext if a < b)
        elif shape == "ring":
            order = rng.sample(members, len(members))
            g.add_edges_from(
                (order[i], order[(i + 1) % len(order)]) for i in range(len(order)) if len(order) > 1
            )
        elif shape == "cut-link":
            g.add_edges_from((a, b) for a in members for b in members if a < b)
            a = leaders[0].uuid if leaders else rng.choice(members)
            others = [m for m in members if m != a]
            if others:
                g.remove_edge(a, rng.choice(others))
        else:
            g.add_edges_from((a, b) for a in members for b in members if a < b and rng.random() < 0.5)
        self._set_graph(g)
        self._log(f"partition {shape}: {sorted(tuple(sorted(e)) for e in g.edges)}")

    def _heal(self) -> None:
        g = self.nx.complete_graph(self._members())
        g.add_nodes_from(self.servers)
        self._set_graph(g)
        self._log("heal network")

    def _crash(self, s: _Server) -> None:
        s.core = None
        self._log(f"crash {s.uuid} (persisted: term {s.hs.term}, voted {s.hs.voted_for}, log {s.last()[1]})")

    def _restart(self, s: _Server) -> None:
        self._start(s)
        self.node_since[s.uuid] = self.now
        self._log(f"restart {s.uuid}")

    def _payload(self) -> bytes:
        self._payload_counter += 1
        return b"v%d" % self._payload_counter

    def _client_ops(self) -> None:
        p, rng = self.profile, self.rng
        leaders = self._leaders()
        if not leaders:
            return
        s = rng.choice(leaders)
        core = s.core
        assert core is not None
        if rng.random() < 0.02:
            self.quiet = not self.quiet  # clients come and go: busy phases and quiet ones
        try:
            if not self.quiet and rng.random() < p.p_propose:
                core.propose(self._payload())
            if rng.random() < p.p_read:
                self._read_counter += 1
                ctx = ("read", self._read_counter)
                self.reads[ctx] = self.max_committed
                core.read_index(ctx)
            if rng.random() < p.p_config:
                self._config_change(s)
            if rng.random() < p.p_transfer:
                target = core.transfer_leadership(
                    rng.choice([None, *core.config.voters()]) if rng.random() < 0.5 else None
                )
                self._log(f"{s.uuid}: transfer leadership to {target}")
            if rng.random() < p.p_step_down:
                core.step_down()
                self._unstable()
                self._log(f"{s.uuid}: step down")
        except RaftError:
            pass
        self._process(s)

    def _config_change(self, s: _Server) -> None:
        core = s.core
        assert core is not None
        rng = self.rng
        members = core.config.uuids()
        for added, doomed in list(self.pending_moves):
            if core.committed_config.peer(added) is not None and core.committed_config.is_voter(added):
                self.pending_moves.remove((added, doomed))
                if doomed in members:
                    self._change(s, ConfigChange(ChangeType.REMOVE_PEER, Peer(doomed)))
                return
        action = rng.choice(["add", "add", "remove", "move", "modify"])
        live_servers = len([x for x in self.servers.values() if not x.destroyed])
        if action in ("add", "move") and live_servers < self.opts.nodes + 2:
            uuid = f"n{self._next_uuid}"
            self._next_uuid += 1
            new = _Server(uuid, RaftConfig(()))
            self.servers[uuid] = new
            self.node_since[uuid] = self.now
            g = self.graph.copy()
            g.add_node(uuid)
            g.add_edges_from((uuid, m) for m in self._members() if m != uuid)
            self._set_graph(g)
            self._start(new)
            kind = rng.choice([MemberType.NON_VOTER, MemberType.NON_VOTER, MemberType.VOTER])
            peer = Peer(
                uuid, f"{uuid}:7050", kind, promote=kind == MemberType.NON_VOTER and rng.random() < 0.8
            )
            cas = core.committed_config.opid_index if rng.random() < 0.5 else None
            if self._change(s, ConfigChange(ChangeType.ADD_PEER, peer, cas)) and action == "move":
                victims = [v for v in core.config.voters() if v != uuid]
                if victims:
                    self.pending_moves.append((uuid, rng.choice(victims)))
        elif action == "remove" and len(members) > 1:
            self._change(s, ConfigChange(ChangeType.REMOVE_PEER, Peer(rng.choice(members))))
        elif action == "modify" and members:
            target = core.config.peer(rng.choice(members))
            assert target is not None
            flip = MemberType.VOTER if target.member_type == MemberType.NON_VOTER else MemberType.NON_VOTER
            self._change(s, ConfigChange(ChangeType.MODIFY_PEER, Peer(target.uuid, target.address, flip)))

    def _change(self, s: _Server, change: ConfigChange) -> bool:
        core = s.core
        assert core is not None
        try:
            idx = core.change_config(change)
        except RaftError as exc:
            self._log(f"{s.uuid}: {change.type.value} {change.peer.uuid} refused: {exc.code.value}")
            return False
        self._log(
            f"{s.uuid}: {change.type.value} {change.peer.uuid} {change.peer.member_type.value} at {idx}"
        )
        self._unstable()
        return True

    def _reap_removed(self) -> None:
        """Servers whose removal is committed are eventually deleted, as the master would."""
        leaders = self._leaders()
        if not leaders:
            return
        cfg = max(leaders, key=lambda x: x.core.term if x.core else 0).core.committed_config  # type: ignore[union-attr]
        for u, s in self.servers.items():
            if not s.destroyed and cfg.peer(u) is None and s.log and self.rng.random() < 0.05:
                if any(
                    x.core is not None and x.core.config.peer(u) is not None
                    for x in self.servers.values()
                    if x.uuid != u
                ):
                    continue
                s.destroyed = True
                s.core = None
                self.graph.remove_edges_from(list(self.graph.edges(u)))
                self._log(f"delete removed server {u}")

    def _faults(self) -> None:
        p, rng = self.profile, self.rng
        if self._isolate_next is not None:
            victim, self._isolate_next = self._isolate_next, None
            if victim in self.graph and not self.servers[victim].destroyed:
                g = self.graph.copy()
                g.remove_edges_from(list(g.edges(victim)))
                self._set_graph(g)
                self._rejoin.append((self.now + rng.randint(2, 3 * ELECTION_TICKS), victim))
                self._log(f"isolate new leader {victim}")
        for due, victim in list(self._rejoin):
            if due <= self.now:
                self._rejoin.remove((due, victim))
                if not self.servers[victim].destroyed:
                    g = self.graph.copy()
                    g.add_edges_from((victim, m) for m in self._members() if m != victim)
                    self._set_graph(g)
                    self._log(f"reconnect {victim}")
        if rng.random() < p.p_bounce:
            live = self._live()
            if live:
                bounced = rng.choice(live)
                self._crash(bounced)
                self._restart(bounced)
        if rng.random() < p.p_partition:
            self._partition()
        elif (
            rng.random() < p.p_heal
            and self.graph.number_of_edges() < len(self.graph) * (len(self.graph) - 1) // 2
        ):
            self._heal()
        live = self._live()
        if live and rng.random() < p.p_crash:
            self._crash(rng.choice(live))
        down = [s for s in self.servers.values() if s.core is None and not s.destroyed]
        if down and rng.random() < p.p_restart:
            self._restart(rng.choice(down))
        if rng.random() < p.p_lossy:
            self.lossy = not self.lossy
            self._unstable()
            self._log(f"network {'lossy' if self.lossy else 'reliable'}")
        if self.lossy:
            self._unstable()
        if self.p_compact and rng.random() < self.p_compact:
            self._compact(rng.choice(live) if live else None)

    def _compact(self, s: _Server | None) -> None:
        """WAL garbage collection on one server: the persisted log loses a prefix of what it applied, which
        a snapshot now holds; a follower that needs it can only be caught up by InstallSnapshot."""
        if s is None or s.core is None or s.core.applied_index < s.log_start:
            return
        below = self.rng.randint(s.log_start + 1, s.core.applied_index + 1)
        s.prev_term = s.log[below - 1 - s.log_start].term
        del s.log[: below - s.log_start]
        s.log_start, s.snap_index = below, below - 1
        s.core.compact(below)
        self._log(f"{s.uuid} compacted its log below {below}")

    # ------------------------------------------------------------ the loop
    def _tick(self) -> None:
        stable = self._stable_leader()
        self.now += 1
        for s in list(self.servers.values()):
            if s.core is not None:
                s.core.tick()
                self._process(s)
        while self.inflight and self.inflight[0][0] <= self.now:
            _, _, _, m = heapq.heappop(self.inflight)
            dst = self.servers.get(m.dst)
            if dst is None or dst.core is None or not self._connected(m.src, m.dst):
                continue
            dst.core.step(m)
            self._process(dst)
        self._check_step()
        self._check_disruption(stable)

    def run(self) -> SimResult:
        try:
            for _ in range(self.opts.steps):
                self._faults()
                self._client_ops()
                self._reap_removed()
                self._tick()
            self._liveness()
        except Violation as v:
            self._log(f"VIOLATION {v.kind}")
            self.result.ok = False
            self.result.violation = str(v)
            self.result.kind = v.kind
        except ConsensusInvariantError as exc:
            self._log("VIOLATION invariant")
            self.result.ok = False
            self.result.violation = f"invariant: {exc}"
            self.result.kind = "invariant"
        self.result.ticks = self.now
        if not self.result.ok:
            self.result.trace = list(self.trace)
        return self.result

    def _liveness(self) -> None:
        self._heal()
        self.lossy = False
        for s in self.servers.values():
            if s.core is None and not s.destroyed:
                self._restart(s)
        self._log("liveness phase: all servers up, network healed")
        self._live_done = False
        proposed: tuple[str, int, int] | None = None
        deadline = self.now + self.opts.liveness_ticks
        while self.now < deadline:
            self._tick()
            if self._live_done:
                return
            leaders = [
                s
                for s in self._leaders()
                if s.core is not None and s.core.current_term_committed() and s.core.transfer_target() is None
            ]
            if leaders:
                s = max(leaders, key=lambda x: x.core.term)  # type: ignore[union-attr]
                assert s.core is not None
                if proposed is None or proposed[0] != s.uuid or proposed[1] != s.core.term:
                    try:
                        idx = s.core.propose(self._live_payload)
                        proposed = (s.uuid, s.core.term, idx)
                        self._process(s)
                    except RaftError:
                        pass
        roles = {u: (s.core.role.value, s.core.term) if s.core else "down" for u, s in self.servers.items()}
        raise Violation(
            "liveness",
            f"no proposal committed within {self.opts.liveness_ticks} ticks of healing; replicas: {roles}",
        )


def simulate(seed: int, opts: SimOptions | None = None) -> SimResult:
    """Run one seed; the same seed and options always give the same result."""
    return Simulation(seed, opts).run()


__all__ = ["AppendRequest", "SimOptions", "SimResult", "Simulation", "Violation", "simulate"]
