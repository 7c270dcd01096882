"""Staged elections: faults that need one exact order of elections, crashes and cuts on one tablet.

Some Raft defects lose data only in a sequence that random faults almost never produce. These nemeses
produce it, the way Kudu's integration tests stage elections: leader failure detection is turned off on
the tablet's three tablet servers (runtime flags, node/server/flags.py), so nobody campaigns unless told
to; elections are started by RPC (RunLeaderElection); a replica is made to crash at an exact point (right
after granting a vote, right after acknowledging entries); cuts move between steps in one partition call.
Each stage starts from a tablet with no leader and three equal logs (`_quiesce`) and ends with failure
detection back on, nothing armed, every server running and the network whole (`_restore`), whatever
happened in between. Roles are drawn with the run's seed.

vote-crash (`vote-not-durable`): a voter crashes right after granting its vote, and a second candidate
asks it again in the same term. Election safety rests on the voter remembering its vote across a crash.
A vote is lost only if the voter restarts before it holds an entry of the new term (once it holds one,
every other candidate of that term has a less up-to-date log), and the second candidate must already be
campaigning in that same term (a later one asks for the next term). With replicas A (voter), B and C:
  1. B is cut off. A is armed to crash after its next granted vote; C runs an election: A grants and
     dies before C's first entry reaches it. C leads term T on A's vote.
  2. The cut moves to C. B runs an election (term T too: it never heard of T), then A starts again and
     B's retried request reaches it. A store that persisted the vote refuses; one that did not grants,
     and B leads term T as well (`same_term_leaders`).
  3. B's side serves the workload for `hold_s`, then everything is restored. Two leaders of one term
     wrote different entries at the same (term, index): log matching no longer tells them apart. At the
     B has acknowledged writes that C lacks at the same indexes; C's clients timed out and moved to B.
     B steps down before the heal, so C's log is the one the tablet keeps: A and B take C's requests as
     matching the entries they hold, C commits and serves its own entries, and B's acknowledged writes
     are gone from every answer. (Left to chance, the outcome depends on whose request lands first:
     when B's wins, C's writes, mostly timed out already, are the ones lost, and the run may be valid.)

figure-8 (`commit-prior-term`): the Raft paper's Figure 8 with three replicas, A (the old-term leader),
C (the newer-term leader) and B (the voter both need):
  1. C is cut off. B is armed to crash after its vote; A runs an election and leads term T1 on B's vote,
     alone: it appends its clients' writes, which nobody else holds.
  2. The cut moves to A; B starts again. B is armed again and C runs elections until it leads a term
     T2 > T1, alone too: its first entry, of term T2, sits at the index where A's writes begin.
  3. The cut moves to C; B starts again, armed to crash right after it acknowledges entries, and A is
     set to send two entries per AppendRequest. A runs elections until it leads a term T3 > T2 on B's
     vote and sends B its entries of term T1: the first batch is A's first entry of T1 and its first
     write, and its own entry of T3 comes later. B acknowledges that batch and crashes.
     A correct leader commits nothing before an entry of T3 is on a majority; one that counts replicas
     for an entry of an older term commits the write and acknowledges it to its client.
  4. The cut moves to A; B starts again. C runs elections until it leads on B's vote (its last entry,
     of T2, is newer than B's, of T1) and overwrites B's copy of the write: an acknowledged write is
     lost. The workload's clients wait up to their operation timeout for A's writes, so the cell needs
     one longer than the stage (40 s in campaigns/full.toml and ci.toml).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from faultline.core import Op, Run
from faultline.db.nodes import backend, role_nodes
from faultline.dbs.store.tools import node_of_address, workload_tablets
from faultline.nemesis import grudge as gr
from faultline.nemesis.base import NemesisError, done, log, nemesis_rng, wait_until


class _StagedElection:
    """What every stage shares: picking the tablet, quiescing it first and restoring it whatever happened;
    the moves themselves are `_Stage`'s."""

    f = ""

    def __init__(self, hold_s: float = 5.0, wait_s: float = 15.0) -> None:
        self.hold_s, self.wait_s = hold_s, wait_s
        self.rng: random.Random | None = None  # set by setup
        # (tablet, replica addresses) of a stage begun and not yet restored: the heal restores it too, so a
        # run stopped mid-stage never leaves failure detection off or a crash point armed
        self.unrestored: dict[str, list[str]] = {}
        self.lock = threading.Lock()

    @property
    def fs(self) -> frozenset[str]:
        return frozenset({self.f})

    def setup(self, test: Run) -> _StagedElection:
        self.rng = nemesis_rng(test, self.f)
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        assert self.rng is not None
        candidates = [t for t in workload_tablets(test) if len(t["replicas"]) == 3]
        if not candidates or test.connect is None:
            return done(op, {"skipped": "no tablet of this run with three replicas"}, kind="fail")
        t = self.rng.choice(candidates)
        addrs: list[str] = t["replica_addrs"]
        steps: list[str] = []
        value: dict[str, Any] = {"tablet": t["tablet"], "steps": steps}
        client = test.connect()
        stage = None
        with self.lock:
            self.unrestored[t["tablet"]] = list(addrs)  # before the first move
        try:
            stage = _Stage(test, client, t["tablet"], addrs, steps, self.wait_s)
            self._stage(stage, stage.quiesce(self._roles), value)
            return done(op, value)
        except NemesisError as exc:
            log.warning("%s: %s", self.f, exc)
            value["error"] = str(exc)
            return done(op, value, kind="info")
        finally:
            if stage is not None:
                stage.restore()
            with self.lock:
                self.unrestored.pop(t["tablet"], None)
            client.close()

    def _roles(self, ends: dict[str, tuple[int, int]]) -> tuple[str, ...] | None:
        """The stage's roles given where each replica's log ends, (last term, last index), or None if no
        assignment fits."""
        raise NotImplementedError

    def _stage(self, stage: _Stage, roles: tuple[str, ...], value: dict[str, Any]) -> None:
        raise NotImplementedError

    def _split(
        self, ends: dict[str, tuple[int, int]], pair_at: Callable[[list[tuple[int, int]]], tuple[int, int]]
    ) -> tuple[str, str, str] | None:
        """Two replicas whose logs end at the same (term, index) `pair_at(sorted ends)` (in random
        order), then the third; None if no two end there."""
        assert self.rng is not None
        at = pair_at(sorted(ends.values()))
        pair = [a for a in sorted(ends) if ends[a] == at]
        if len(pair) < 2:
            return None
        pair = self.rng.sample(pair, 2)
        third = next(a for a in sorted(ends) if a not in pair)
        return pair[0], pair[1], third

    def heal(self, test: Run) -> None:
        """The network, and any stage not restored yet (its worker cut off): servers started, flags back,
        crash points disarmed. Restoring twice is harmless."""
        backend(test).heal_network()
        with self.lock:
            pending = dict(self.unrestored)
        for tablet, addrs in pending.items():
            client = test.connect() if test.connect is not None else None
            if client is None:
                continue
            try:
                _Stage(test, client, tablet, addrs, [], self.wait_s).restore()
                with self.lock:
                    self.unrestored.pop(tablet, None)
            finally:
                client.close()


class VoteCrashNemesis(_StagedElection):
    """A voter crashes right after its vote and is asked again in the same term (module docstring)."""

    f = "vote-crash"

    def _roles(self, ends: dict[str, tuple[int, int]]) -> tuple[str, ...] | None:
        """Both candidates' logs end at the same entry, the voter's no later (by term, then index): their
        first entries of the staged term then share an index, and the voter grants both."""
        split = self._split(ends, max)
        return None if split is None else (split[2], split[0], split[1])

    def _stage(self, st: _Stage, roles: tuple[str, ...], value: dict[str, Any]) -> None:
        voter, first, second = roles
        value.update(voter=st.node[voter], first=st.node[first], second=st.node[second])
        st.isolate(second)
        st.arm(voter, "fault_crash_after_vote_fraction")
        term = st.elect(first)
        value["term"] = term
        st.steps.append(
            f"{st.node[first]} runs an election in term {term}; {st.node[voter]} crashes after its vote"
        )
        st.wait_leads_alone(first, voter, term)
        st.isolate(first)
        second_term = st.elect(second)
        st.steps.append(f"{st.node[second]} runs an election in term {second_term}")
        st.start(voter)
        led = st.wait_leader((second, voter))
        if led is not None:
            value.update(
                second_leader=st.node[led[0]],
                second_leader_term=led[1],
                same_term_leaders=led[1] == term and led[0] == second,
            )
        else:
            value.update(second_leader=None, same_term_leaders=False)
        time.sleep(self.hold_s)
        if value["same_term_leaders"]:
            # Both leaders of T now hold acknowledged writes the other lacks, and whichever log the tablet
            # keeps, one side's are lost. Which one depends on whose request lands first at the heal; B
            # steps down (and A, restarted with failure detection on, is kept from campaigning) so that
            # it is always C's log, and B's acknowledged writes are the lost ones.
            st.set_flag(voter, "enable_leader_failure_detection", "false")
            st.step_down_leaders(among=[second])


class Figure8Nemesis(_StagedElection):
    """An entry of an older term is committed by counting replicas, then overwritten (module docstring)."""

    f = "figure-8"

    def _roles(self, ends: dict[str, tuple[int, int]]) -> tuple[str, ...] | None:
        """The old leader's and the voter's logs end at the same entry, the new leader's no earlier (by
        term, then index, as a voter compares them): the old leader's first batch to the voter is then its
        first entry of T1 and its first write, and the new leader's entries conflict with them from that
        index on."""
        split = self._split(ends, min)
        return None if split is None else (split[0], split[2], split[1])

    def _stage(self, st: _Stage, roles: tuple[str, ...], value: dict[str, Any]) -> None:
        old, new, voter = roles
        value.update(old_leader=st.node[old], new_leader=st.node[new], voter=st.node[voter])
        st.isolate(new)
        st.arm(voter, "fault_crash_after_vote_fraction")
        t1 = st.elect(old)
        st.wait_leads_alone(old, voter, t1)
        time.sleep(self.hold_s)  # the old leader's clients append writes nobody else holds
        first_write = st.ends[old][1] + 2  # after the old leader's first entry of T1
        alone = st.status(old)
        value.update(t1=t1, old_last_index=alone.last_index if alone else None)
        if alone is None or alone.last_index < first_write:
            # only its own first entry: its first batch would carry its T3 entry too, nothing to expose
            raise NemesisError(f"{st.node[old]} got no write while it led term {t1} alone")

        st.isolate(old)
        st.start(voter, {"enable_leader_failure_detection": "false"}, arm="fault_crash_after_vote_fraction")
        t2 = st.lead(new, above=t1, voter=voter)
        st.wait_down(voter)
        value["t2"] = t2

        st.isolate(new)
        st.start(voter, {"enable_leader_failure_detection": "false"}, arm="fault_crash_after_append_fraction")
        st.set_flag(old, "consensus_max_batch_entries", "2")  # its term's first entry and one write
        t3 = st.lead(old, above=t2, voter=voter)
        value["t3"] = t3
        st.wait_down(voter)
        after = st.status(old)
        value["old_commit_index"] = after.commit_index if after else None
        # true only where a leader committed an older term's entry by counting replicas
        value["old_term_write_committed"] = after is not None and after.commit_index >= first_write
        st.steps.append(
            f"{st.node[voter]} crashed after acknowledging entries; {st.node[old]} commits up to "
            f"{value['old_commit_index']} (its first write of term {t1} is at {first_write})"
        )

        st.isolate(old)
        st.start(voter, {"enable_leader_failure_detection": "false"})
        value["t4"] = st.lead(new, above=t3, voter=voter)
        time.sleep(self.hold_s)


class _Stage:
    """One tablet's three replicas and the few moves a stage is made of; `steps` records each."""

    def __init__(
        self, test: Run, client: Any, tablet: str, addrs: list[str], steps: list[str], wait_s: float
    ) -> None:
        self.test, self.client, self.tablet, self.addrs, self.steps = test, client, tablet, addrs, steps
        self.wait_s = wait_s
        self.servers = role_nodes(test, "tservers")
        self.node = {a: node_of_address(test, a) for a in addrs}
        if any(n not in self.servers for n in self.node.values()):
            raise NemesisError(f"no tablet server node for one of {addrs}")
        self.backend = backend(test)
        self.rng = nemesis_rng(test, f"stage-{tablet}")
        self.ends: dict[str, tuple[int, int]] = {}  # (last term, last index) of each log once quiesced

    # ------------------------------------------------------------------ RPCs to one server
    def call(self, addr: str, method: str, request: Any, timeout: float = 2.0) -> Any:
        import grpc

        from faultline.node.protos import node_pb2_grpc as pbg

        try:
            return self.client.pool.call(addr, pbg.ConsensusStub, method, request, timeout=timeout)
        except grpc.RpcError as exc:
            raise NemesisError(
                f"{method} on {self.node.get(addr) or addr}: {exc.code().name} {exc.details()}"
            ) from None

    def status(self, addr: str) -> Any | None:
        """The replica's status on `addr`, or None if the server does not answer."""
        from faultline.node.protos import node_pb2 as pb

        try:
            resp = self.call(addr, "ListReplicas", pb.ListTabletsRequest(tablet_id=self.tablet), timeout=1.0)
        except NemesisError:
            return None
        return next((st for st in resp.replicas if st.tablet_id == self.tablet), None)

    def set_flag(self, addr: str, flag: str, value: str) -> None:
        from faultline.node.protos import node_pb2 as pb

        self.call(addr, "SetFlag", pb.SetFlagRequest(flag=flag, value=value))

    def arm(self, addr: str, crash_point: str) -> None:
        """Arms a crash point on `addr` for this tablet's replica only."""
        self.set_flag(addr, "fault_crash_tablet", self.tablet)
        self.set_flag(addr, crash_point, "1")

    def elect(self, addr: str) -> int:
        from faultline.node.protos import node_pb2 as pb

        return int(
            self.call(addr, "RunLeaderElection", pb.RunLeaderElectionRequest(tablet_id=self.tablet)).term
        )

    def step_down_leaders(self, among: list[str] | None = None) -> None:
        from faultline.node.protos import node_pb2 as pb

        for a in among or self.addrs:
            st = self.status(a)
            if st is not None and st.role == "LEADER":
                self.call(a, "LeaderStepDown", pb.LeaderStepDownRequest(tablet_id=self.tablet, abrupt=True))
                self.steps.append(f"{self.node[a]} stepped down in term {st.term}")

    # ------------------------------------------------------------------ moves
    def quiesce(
        self, pick: Callable[[dict[str, tuple[int, int]]], tuple[str, ...] | None], tries: int = 8
    ) -> tuple[str, ...]:
        """Leaves the tablet with no leader and nobody campaigning, its logs ending where the stage needs
        them; returns the roles `pick` chose from where each replica's log ends (None: not yet).

        Where the logs end matters: the stage's leaders must put their first entries at the indexes the
        stage means. A follower that lagged when the leader stepped down would meet entries of two terms
        at one index where the stage needs one, and the stage would test something else. Under load a
        step-down nearly always leaves a batch on the wire, so the stages accept any ends they can assign
        roles to; when none fits, the longest log leads once more until the others hold all of it, and
        steps down again."""
        for a in self.addrs:
            self.set_flag(a, "enable_leader_failure_detection", "false")
        self.steps.append(
            "leader failure detection off on " + ", ".join(str(self.node[a]) for a in self.addrs)
        )
        self.step_down_leaders()
        for _ in range(tries):
            time.sleep(0.5)  # entries already on the wire land; without a leader nothing new is appended
            statuses: dict[str, Any] = {a: self.status(a) for a in self.addrs}  # None: no answer
            if any(st is None for st in statuses.values()):
                raise NemesisError("a replica does not answer")
            ends = {a: (int(st.last_term), int(st.last_index)) for a, st in statuses.items()}
            self.ends = ends
            roles = pick(ends)
            told = ", ".join(f"{self.node[a]} {ends[a][1]} (term {ends[a][0]})" for a in self.addrs)
            if roles is not None:
                self.steps.append(f"logs end at {told}")
                return roles
            longest = max(self.addrs, key=lambda a: ends[a])
            self.elect(longest)
            self.steps.append(f"logs end at {told}: {self.node[longest]} leads again to even them")

            def even(lead: str = longest) -> bool:
                sts: dict[str, Any] = {a: self.status(a) for a in self.addrs}  # None: no answer
                return (
                    all(st is not None for st in sts.values())
                    and sts[lead].role == "LEADER"
                    and len({(st.last_term, st.last_index) for st in sts.values()}) == 1
                )

            wait_until(even, 5.0, 0.05, "even logs")
            self.step_down_leaders()
        raise NemesisError(f"the logs of {self.tablet} never ended where the stage needs them")

    def isolate(self, addr: str) -> None:
        """Cuts `addr` off from the other tablet servers; replaces any earlier cut in one step."""
        self.backend.partition(gr.isolate_one(self.servers, self.rng, node=self.node[addr]))
        self.steps.append(f"{self.node[addr]} cut off")

    def start(self, addr: str, flags: Mapping[str, str] | None = None, arm: str = "") -> None:
        """Starts the server again and, as soon as it answers, sets `flags` and arms the crash point `arm`
        (a restart forgot them)."""
        self.backend.start(str(self.node[addr]))
        if flags or arm:
            if not wait_until(lambda: self.status(addr) is not None, self.wait_s, 0.05, "server back"):
                raise NemesisError(f"{self.node[addr]} did not come back")
            for k, v in (flags or {}).items():
                self.set_flag(addr, k, v)
            if arm:
                self.arm(addr, arm)
        said = [f"{k}={v}" for k, v in (flags or {}).items()] + ([f"{arm} armed"] if arm else [])
        self.steps.append(f"{self.node[addr]} started again" + (f" with {', '.join(said)}" if said else ""))

    def wait_leads_alone(self, leader: str, voter: str, term: int) -> None:
        """Waits until `leader` leads `term` and `voter` crashed after its vote."""

        def ready() -> bool:
            return _leads(self.status(leader), term) and self.status(voter) is None

        if not wait_until(ready, self.wait_s, 0.1, "leader, voter crashed"):
            raise NemesisError(
                f"{self.node[leader]} did not lead term {term} with {self.node[voter]} crashed"
            )
        self.steps.append(f"{self.node[leader]} leads term {term}; {self.node[voter]} crashed after its vote")

    def wait_down(self, addr: str) -> None:
        """Waits until the server armed with a crash point has crashed."""
        if not wait_until(lambda: self.status(addr) is None, self.wait_s, 0.1, "crashed"):
            raise NemesisError(f"{self.node[addr]} did not crash at its crash point")
        self.steps.append(f"{self.node[addr]} crashed")

    def wait_leader(self, among: tuple[str, ...]) -> tuple[str, int] | None:
        """The first of `among` seen leading, and its term; None if none leads within the wait."""
        led: list[tuple[str, int]] = []

        def someone_leads() -> bool:
            for a in among:
                st = self.status(a)
                if st is not None and st.role == "LEADER":
                    led.append((a, int(st.term)))
                    return True
            return False

        if wait_until(someone_leads, self.wait_s, 0.1, "a leader"):
            self.steps.append(f"{self.node[led[0][0]]} leads term {led[0][1]}")
            return led[0]
        self.steps.append("nobody leads")
        return None

    def lead(self, addr: str, above: int, voter: str) -> int:
        """Runs elections on `addr` until it leads a term above `above` (a refused vote still teaches
        it the voter's term, so the next try asks for a newer one); returns that term."""
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            term = self.elect(addr)

            def leads(t: int = term) -> bool:
                return _leads(self.status(addr), t)

            if term > above and wait_until(leads, 2.0, 0.05, "leads"):
                self.steps.append(f"{self.node[addr]} leads term {term} on {self.node[voter]}'s vote")
                return term
            self.steps.append(f"{self.node[addr]} ran in term {term}: not leading")
        raise NemesisError(f"{self.node[addr]} never led a term above {above}")

    def alive(self, addr: str) -> bool:
        """Whether the server on `addr` answers at all (`status` is also None when it lacks the replica)."""
        from faultline.node.protos import node_pb2 as pb

        try:
            self.call(addr, "ListReplicas", pb.ListTabletsRequest(), timeout=1.0)
        except NemesisError:
            return False
        return True

    def restore(self) -> None:
        """Every server running, the network whole, then nothing armed, defaults back, failure detection
        on. The network heals first: replicas then hear from whoever still leads before they may campaign."""
        from faultline.node.server.flags import RuntimeFlags

        for a in self.addrs:
            if not self.alive(a):

                def start(a: str = a) -> None:
                    self.backend.start(str(self.node[a]))

                def answers(a: str = a) -> bool:
                    return self.alive(a)

                _quietly(start, f"start {self.node[a]}")
                wait_until(answers, 15.0, 0.2, "server back")
        _quietly(self.backend.heal_network, "heal")
        for a in self.addrs:
            for k, v in RuntimeFlags().as_text().items():

                def set_back(a: str = a, k: str = k, v: str = v) -> None:
                    self.set_flag(a, k, v)

                _quietly(set_back, f"{k} back to {v} on {a}")
        self.steps.append("every server running, network healed, flags back to their defaults")


def _leads(st: Any, term: int) -> bool:
    return st is not None and st.role == "LEADER" and st.term == term


def _quietly(action: Callable[[], Any], what: str) -> None:
    """Runs `action`; a failure is logged, and restoring goes on with the rest."""
    try:
        action()
    except Exception as exc:
        log.warning("staged election: %s failed: %s", what, exc)
