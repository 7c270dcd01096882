"""Unit tests of the Raft core's rules, driven by hand through a tiny in-test network."""

from __future__ import annotations

import dataclasses
import random

import pytest

from faultline.node.consensus import (
    AppendRequest,
    AppendResponse,
    ChangeType,
    ConfigChange,
    Entry,
    EntryType,
    ErrorCode,
    EventKind,
    HardState,
    InstallSnapshot,
    MemberType,
    Options,
    Peer,
    PeerHealth,
    PersistentState,
    RaftConfig,
    RaftCore,
    RaftError,
    Ready,
    Role,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)


def make(uuid: str, config: RaftConfig, entries=(), term: int = 0, voted: str | None = None, bugs=(), **kw):
    opts = Options(election_ticks=10, heartbeat_ticks=2, bugs=frozenset(bugs), **kw)
    return RaftCore(
        uuid, PersistentState(HardState(term, voted), config, tuple(entries)), opts, random.Random(7)
    )


def drain(core: RaftCore) -> Ready:
    r = core.ready()
    core.advance(r)
    return r


class Net:
    """Delivers every message at once; `down` servers receive nothing and send nothing."""

    def __init__(self, ids: list[str], config: RaftConfig | None = None, bugs=(), **kw) -> None:
        cfg = config or RaftConfig.of(*ids)
        self.cores = {u: make(u, cfg if cfg.peer(u) else RaftConfig(()), bugs=bugs, **kw) for u in ids}
        for i, c in enumerate(self.cores.values()):
            c.rng = random.Random(i)
        self.queue: list = []
        self.down: set[str] = set()
        self.readies: dict[str, list[Ready]] = {u: [] for u in ids}

    def flush(self, u: str) -> None:
        core = self.cores[u]
        while core.has_ready():
            r = core.ready()
            self.readies[u].append(r)
            self.handle(u, r)
            core.advance(r)

    def handle(self, u: str, r: Ready) -> None:
        """What the node does with a Ready before advancing: here, hand its messages to the network."""
        if u not in self.down:
            self.queue.extend(r.messages)

    def settle(self, limit: int = 10_000) -> None:
        for u in self.cores:
            self.flush(u)
        n = 0
        while self.queue and n < limit:
            m = self.queue.pop(0)
            n += 1
            if m.dst in self.down or m.src in self.down or m.dst not in self.cores:
                continue
            self.cores[m.dst].step(m)
            self.flush(m.dst)

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            for u, c in self.cores.items():
                if u not in self.down:
                    c.tick()
            self.settle()

    def leader(self) -> RaftCore | None:
        leaders = [c for u, c in self.cores.items() if c.role == Role.LEADER and u not in self.down]
        return max(leaders, key=lambda c: c.term) if leaders else None

    def elect(self, max_ticks: int = 200) -> RaftCore:
        for _ in range(max_ticks):
            self.tick()
            lead = self.leader()
            if lead is not None and lead.current_term_committed():
                return lead
        raise AssertionError("no leader")


def test_election_noop_and_replication():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    assert lead.entry(1).type == EntryType.NO_OP and lead.entry(1).term == lead.term
    idx = lead.propose(b"x")
    net.settle()
    net.tick(3)
    for c in net.cores.values():
        assert c.commit_index >= idx and c.entry(idx).payload == b"x"
    applied = [e for r in net.readies["b"] for e in r.committed_entries]
    assert [e.index for e in applied] == list(range(1, idx + 1))


def test_pre_vote_does_not_bump_term():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    term = lead.term
    iso = next(u for u in net.cores if u != lead.uuid)
    net.down.add(iso)  # isolated: its pre-votes go nowhere
    for _ in range(100):
        net.cores[iso].tick()
        net.flush(iso)
    assert net.cores[iso].term == term
    assert net.cores[iso].role == Role.PRE_CANDIDATE or net.cores[iso].role == Role.FOLLOWER
    net.down.clear()
    net.tick(5)
    assert net.leader() is lead and lead.term == term  # rejoining did not disrupt the leader


def test_request_vote_log_up_to_date_check():
    cfg = RaftConfig.of("a", "b")
    voter = make("b", cfg, [Entry(1, 1), Entry(2, 2)], term=2)
    voter.step(VoteRequest("a", "b", 3, last_log_term=1, last_log_index=5))
    r = drain(voter)
    assert r.messages == [VoteResponse("b", "a", 3, False, False, "log not up to date")]
    voter.step(VoteRequest("c", "b", 3, last_log_term=2, last_log_index=2))
    r = drain(voter)
    assert r.messages[0].granted and voter.voted_for == "c"


def test_vote_is_persisted_before_it_is_sent():
    cfg = RaftConfig.of("a", "b", "c")
    voter = make("b", cfg, term=1)
    voter.step(VoteRequest("a", "b", 2, 0, 0))
    r = voter.ready()
    assert r.messages[0].granted
    assert r.hard_state == HardState(2, "a")  # persisted in the same Ready, before the messages go out


def test_vote_not_durable_bug_loses_the_vote():
    cfg = RaftConfig.of("a", "b", "c")
    voter = make("b", cfg, term=1, bugs={"vote-not-durable"})
    voter.step(VoteRequest("a", "b", 2, 0, 0))
    r = drain(voter)
    assert r.messages[0].granted and r.hard_state == HardState(2, None)
    # crash and restart from what was persisted: the vote is gone, a second candidate gets it too
    again = make("b", cfg, term=r.hard_state.term, voted=r.hard_state.voted_for)
    again.step(VoteRequest("c", "b", 2, 0, 0))
    assert drain(again).messages[0].granted


def test_restarted_voter_keeps_its_vote():
    cfg = RaftConfig.of("a", "b", "c")
    again = make("b", cfg, term=2, voted="a")
    again.step(VoteRequest("c", "b", 2, 0, 0))
    assert not drain(again).messages[0].granted


def test_vote_withholding_and_transfer_exception():
    cfg = RaftConfig.of("a", "b", "c")
    f = make("b", cfg, [Entry(1, 1)], term=1)
    f.step(AppendRequest("a", "b", 1, 1, 1, (), 1))
    drain(f)
    f.step(VoteRequest("c", "b", 2, 1, 1, pre_vote=True))
    r = drain(f)
    assert not r.messages[0].granted and "live leader" in r.messages[0].reason
    f.step(VoteRequest("c", "b", 2, 1, 1))
    assert not drain(f).messages[0].granted and f.term == 1  # withheld without adopting the term
    f.step(VoteRequest("c", "b", 2, 1, 1, transfer=True))
    assert drain(f).messages[0].granted and f.term == 2
    g = make("b", cfg, [Entry(1, 1)], term=1, bugs={"no-vote-withholding"})
    g.step(AppendRequest("a", "b", 1, 1, 1, (), 1))
    drain(g)
    g.step(VoteRequest("c", "b", 2, 1, 1))
    assert drain(g).messages[0].granted
    # after the minimum election timeout without the leader, the vote is given
    for _ in range(10):
        f2 = f
        f2.tick()
    h = make("b", cfg, [Entry(1, 1)], term=1)
    h.step(AppendRequest("a", "b", 1, 1, 1, (), 1))
    drain(h)
    for _ in range(10):
        h.tick()
    drain(h)
    h.step(VoteRequest("c", "b", 2, 1, 1, pre_vote=True))
    assert drain(h).messages[0].granted and h.term == 1


def test_conflict_truncation_and_fast_backoff():
    cfg = RaftConfig.of("a", "b")
    f = make("b", cfg, [Entry(1, 1), Entry(1, 2), Entry(2, 3), Entry(2, 4), Entry(2, 5)], term=2)
    f.step(AppendRequest("a", "b", 3, 4, 3, (), 0))
    r = drain(f)
    rej = r.messages[0]
    assert not rej.success and rej.conflict_index == 3 and rej.last_index == 5
    f.step(AppendRequest("a", "b", 3, 2, 1, (Entry(3, 3), Entry(3, 4)), 0))
    r = drain(f)
    assert r.truncate_from == 3 and [e.index for e in r.entries] == [3, 4]
    assert f.last_index() == 4 and r.messages[0].success and r.messages[0].match_index == 4


def test_follower_commit_bounded_by_batch():
    cfg = RaftConfig.of("a", "b")
    stale = [Entry(1, 1), Entry(1, 2), Entry(1, 3), Entry(1, 4)]
    f = make("b", cfg, stale, term=1)
    # the new leader's entries 3, 4 are of term 2; it is still probing at prev 2 with commit 4
    f.step(AppendRequest("a", "b", 2, 2, 1, (), commit_index=4))
    drain(f)
    assert f.commit_index == 2
    bad = make("b", cfg, stale, term=1, bugs={"follower-commit-past-batch"})
    bad.step(AppendRequest("a", "b", 2, 2, 1, (), commit_index=4))
    r = drain(bad)
    assert bad.commit_index == 4 and [e.index for e in r.committed_entries][-1] == 4  # stale entries applied


def _leader_of(uuid: str, cfg: RaftConfig, entries, term: int, bugs=()) -> RaftCore:
    """A replica with `entries` that wins an election at term + 1 from the other voters."""
    core = make(uuid, cfg, entries, term=term, bugs=bugs)
    for _ in range(25):
        core.tick()
        if core.role == Role.PRE_CANDIDATE:
            break
    for v in cfg.voters():
        if v != uuid:
            core.step(VoteResponse(v, uuid, term + 1, True, pre_vote=True))
    for v in cfg.voters():
        if v != uuid:
            core.step(VoteResponse(v, uuid, term + 1, True))
    assert core.role == Role.LEADER and core.term == term + 1
    drain(core)
    return core


def test_figure_8_old_term_entry_not_committed_by_counting():
    cfg = RaftConfig.of("s1", "s2", "s3", "s4", "s5")
    lead = _leader_of("s1", cfg, [Entry(1, 1), Entry(2, 2)], term=3)
    assert lead.term == 4 and lead.entry(3).term == 4  # its NO_OP
    lead.step(AppendResponse("s2", "s1", 4, True, match_index=2, last_index=2))
    lead.step(AppendResponse("s3", "s1", 4, True, match_index=2, last_index=2))
    drain(lead)
    assert lead.commit_index == 0  # (2, term 2) is on a majority but may still be overwritten
    lead.step(AppendResponse("s2", "s1", 4, True, match_index=3, last_index=3))
    lead.step(AppendResponse("s3", "s1", 4, True, match_index=3, last_index=3))
    drain(lead)
    assert lead.commit_index == 3  # committed through the current term's entry

    bad = _leader_of("s1", cfg, [Entry(1, 1), Entry(2, 2)], term=3, bugs={"commit-prior-term"})
    bad.step(AppendResponse("s2", "s1", 4, True, match_index=2, last_index=2))
    bad.step(AppendResponse("s3", "s1", 4, True, match_index=2, last_index=2))
    drain(bad)
    assert bad.commit_index == 2


def test_figure_8_end_to_end():
    """The whole scenario: with the bug, the entry committed in (c) is overwritten in (d)."""
    for bugs, expect_overwrite in (((), False), (("commit-prior-term",), True)):
        cfg = RaftConfig.of("s1", "s2", "s3", "s4", "s5")
        # (b): s1 led term 2 and wrote (2, t2) on s1, s2; s5 led term 3 and wrote (2, t3) on itself
        s1 = _leader_of("s1", cfg, [Entry(1, 1), Entry(2, 2)], term=3, bugs=bugs)  # (c): s1 leads term 4
        s3_entries = [Entry(1, 1)]
        # s1 replicates (2, t2) to s3 and hears back before its NO_OP (3, t4) got anywhere
        s1.step(AppendResponse("s2", "s1", 4, True, match_index=2, last_index=2))
        s1.step(AppendResponse("s3", "s1", 4, True, match_index=2, last_index=2))
        drain(s1)
        committed = s1.commit_index >= 2
        s3_entries.append(Entry(2, 2))
        # (d): s1 crashes; s5 (last entry (2, t3)) wins votes from s2, s3, s4 and overwrites index 2
        voters = [make(u, cfg, [Entry(1, 1), Entry(2, 2)], term=4) for u in ("s2", "s3")]
        for v in voters:
            v.step(VoteRequest("s5", v.uuid, 5, last_log_term=3, last_log_index=2))
            assert drain(v).messages[0].granted
        assert committed == expect_overwrite  # committed, then lost: exactly what the rule prevents


def test_count_nonvoter_acks():
    cfg = RaftConfig(
        (
            Peer("a"),
            Peer("b"),
            Peer("c"),
            Peer("d", member_type=MemberType.NON_VOTER),
            Peer("e", member_type=MemberType.NON_VOTER),
        )
    )
    for bugs, committed in (((), False), (("count-nonvoter-acks",), True)):
        lead = _leader_of("a", cfg, [], term=0, bugs=bugs)
        for nv in ("d", "e"):
            lead.step(AppendResponse(nv, "a", 1, True, match_index=1, last_index=1))
        drain(lead)
        assert (lead.commit_index == 1) == committed
        lead.step(AppendResponse("b", "a", 1, True, match_index=1, last_index=1))
        drain(lead)
        assert lead.commit_index == 1


def test_non_voter_never_campaigns():
    cfg = RaftConfig((Peer("a"), Peer("b", member_type=MemberType.NON_VOTER)))
    nv = make("b", cfg)
    for _ in range(100):
        nv.tick()
    assert nv.role == Role.LEARNER and not drain(nv).messages


def test_config_change_rules():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    with pytest.raises(RaftError) as e:
        lead.change_config(ConfigChange(ChangeType.ADD_PEER, Peer("d"), cas_config_index=99))
    assert e.value.code == ErrorCode.CAS_FAILED
    idx = lead.change_config(
        ConfigChange(ChangeType.ADD_PEER, Peer("d", "d:1", MemberType.NON_VOTER, True), cas_config_index=-1)
    )
    assert lead.config.peer("d") is not None and lead.config.opid_index == idx  # effective on append
    assert lead.committed_config.peer("d") is None
    with pytest.raises(RaftError) as e:
        lead.change_config(ConfigChange(ChangeType.REMOVE_PEER, Peer("c")))
    assert e.value.code == ErrorCode.CONFIG_CHANGE_PENDING
    with pytest.raises(RaftError) as e:
        lead.change_config(ConfigChange(ChangeType.ADD_PEER, Peer("a")))
    assert e.value.code in (ErrorCode.INVALID_CONFIG_CHANGE, ErrorCode.CONFIG_CHANGE_PENDING)
    # the new server joins, catches up as a NON_VOTER with promote, and the leader promotes it
    net.cores["d"] = make("d", RaftConfig(()))
    net.readies["d"] = []
    net.tick(30)
    assert lead.committed_config.is_voter("d")
    assert net.cores["d"].role == Role.FOLLOWER
    assert any(ev.kind == EventKind.PEER_PROMOTED for r in net.readies[lead.uuid] for ev in r.events)
    follower = next(u for u in net.cores if u != lead.uuid)
    assert any(r.committed_config is not None and r.hard_state is not None for r in net.readies[follower])


def test_config_change_refused_before_current_term_commit():
    cfg = RaftConfig.of("a", "b", "c")
    lead = _leader_of("a", cfg, [Entry(1, 1)], term=1)
    with pytest.raises(RaftError) as e:
        lead.change_config(ConfigChange(ChangeType.REMOVE_PEER, Peer("c")))
    assert e.value.code == ErrorCode.LEADER_NOT_READY


def test_config_rolls_back_when_its_entry_is_truncated():
    cfg = RaftConfig.of("a", "b", "c")
    new = RaftConfig.of("a", "b", "c", "d").with_index(2)
    f = make("b", cfg, [Entry(1, 1)], term=1)
    f.step(AppendRequest("a", "b", 1, 1, 1, (Entry(1, 2, EntryType.CONFIG, config=new),), 1))
    r = drain(f)
    assert f.config == new and any(ev.kind == EventKind.CONFIG_CHANGED for ev in r.events)
    f.step(AppendRequest("c", "b", 2, 1, 1, (Entry(2, 2, EntryType.NO_OP),), 1))
    r = drain(f)
    assert f.config == cfg and r.truncate_from == 2


def test_remove_leader_transfers_first():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    with pytest.raises(RaftError) as e:
        lead.change_config(ConfigChange(ChangeType.REMOVE_PEER, Peer(lead.uuid)))
    assert e.value.code == ErrorCode.STEPPING_DOWN and e.value.leader_hint in net.cores
    target = e.value.leader_hint
    net.settle()
    net.tick(3)
    assert net.leader().uuid == target and lead.role != Role.LEADER


def test_transfer_refuses_writes_and_target_wins_despite_live_leader():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    target = next(u for u in net.cores if u != lead.uuid)
    net.down.add(target)  # target lags: the transfer window stays open
    lead.propose(b"x")
    net.settle()
    assert lead.transfer_leadership(target) == target
    with pytest.raises(RaftError) as e:
        lead.propose(b"y")
    assert e.value.code == ErrorCode.TRANSFER_IN_PROGRESS
    with pytest.raises(RaftError):
        lead.change_config(ConfigChange(ChangeType.REMOVE_PEER, Peer(target)))
    net.down.clear()
    net.tick(4)
    new = net.leader()
    assert new is not None and new.uuid == target and new.term == lead.term
    assert lead.role == Role.FOLLOWER


def test_transfer_window_expires():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    target = next(u for u in net.cores if u != lead.uuid)
    net.down.add(target)
    lead.propose(b"x")
    lead.transfer_leadership(target)
    net.tick(12)
    assert lead.role == Role.LEADER and lead.transfer_target() is None
    assert any(ev.kind == EventKind.TRANSFER_FAILED for r in net.readies[lead.uuid] for ev in r.events)
    lead.propose(b"y")


def test_timeout_now_for_wrong_term_is_ignored():
    f = make("b", RaftConfig.of("a", "b"), term=3)
    f.step(TimeoutNow("a", "b", 2))
    assert f.role == Role.FOLLOWER and f.term == 3


def test_step_down():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    lead.step_down()
    assert lead.role == Role.FOLLOWER
    net.tick(60)
    assert net.leader() is not None


def test_read_index_needs_a_heartbeat_round():
    for bugs, immediate in (((), False), (("stale-leader-reads",), True)):
        net = Net(["a", "b", "c"], bugs=bugs)
        lead = net.elect()
        others = [u for u in net.cores if u != lead.uuid]
        net.down.update(others)  # partitioned away: it must not answer
        lead.read_index("r1")
        net.settle()
        answered = [rs for r in net.readies[lead.uuid] for rs in r.read_states]
        assert bool(answered) == immediate
        net.down.clear()
        net.tick(3)
        answered = [rs for r in net.readies[lead.uuid] for rs in r.read_states]
        assert answered and answered[0].ctx == "r1" and answered[0].index >= 1


def test_read_index_refused_on_follower():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    f = next(c for c in net.cores.values() if c is not lead)
    with pytest.raises(RaftError) as e:
        f.read_index("r")
    assert e.value.code == ErrorCode.NOT_LEADER and e.value.leader_hint == lead.uuid


def test_peer_health():
    net = Net(["a", "b", "c"], failed_after_ticks=20)
    lead = net.elect()
    assert set(lead.peer_health().values()) == {PeerHealth.HEALTHY}
    dead = next(u for u in net.cores if u != lead.uuid)
    net.down.add(dead)
    for i in range(30):
        lead.propose(b"%d" % i)
        net.tick()
    assert lead.peer_health()[dead] == PeerHealth.FAILED
    drain(lead)
    lead.compact(lead.applied_index - 5)
    assert lead.peer_health()[dead] == PeerHealth.FAILED_UNRECOVERABLE
    assert lead.log_start <= lead.retention_index(1000) <= lead.applied_index + 1


def test_single_voter_commits_alone():
    net = Net(["a"])
    lead = net.elect()
    idx = lead.propose(b"z")
    net.settle()
    assert lead.commit_index == idx


def test_candidate_retries_votes_but_not_pre_votes():
    cfg = RaftConfig.of("a", "b", "c")
    c = make("a", cfg, pre_vote=False)
    sent = []
    for _ in range(40):
        c.tick()
        sent += [m for m in drain(c).messages if isinstance(m, VoteRequest)]
        if c.role == Role.CANDIDATE and len(sent) >= 4:
            break
    term = c.term
    assert c.role == Role.CANDIDATE and [m.dst for m in sent if m.term == term].count("b") >= 2  # retried
    p = make("a", cfg)
    pre = []
    while not pre:
        p.tick()
        pre += [m for m in drain(p).messages if isinstance(m, VoteRequest)]
    for _ in range(9):  # less than the minimum election timeout: no new round, and no retries
        p.tick()
        pre += [m for m in drain(p).messages if isinstance(m, VoteRequest)]
    assert p.role == Role.PRE_CANDIDATE and sorted(m.dst for m in pre) == ["b", "c"]


def test_follower_accepts_prev_below_its_compacted_start():
    cfg = RaftConfig.of("a", "b")
    f = make("b", cfg, [Entry(1, i) for i in range(1, 11)], term=1)
    f.step(AppendRequest("a", "b", 1, 10, 1, (), commit_index=10))
    drain(f)
    f.compact(8)
    assert f.log_start == 8 and f.term_at(7) == 1 and f.term_at(5) is None
    f.step(AppendRequest("a", "b", 1, 5, 1, tuple(Entry(1, i) for i in range(6, 12)), commit_index=11))
    r = drain(f)
    assert r.messages[0].success and f.last_index() == 11 and f.commit_index == 11


def test_reads_in_one_ready_share_one_round_and_later_reads_need_a_new_one():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    net.flush(lead.uuid)
    lead.read_index("r1")
    lead.read_index("r2")
    rd = lead.ready()
    rounds = [m for m in rd.messages if isinstance(m, AppendRequest)]
    assert len(rounds) == 2 and len({m.seq for m in rounds}) == 1  # one heartbeat per follower
    # a read that arrives after that round left must not ride on it: it could be confirming a stale leader
    lead.read_index("r3")
    rd3 = lead.ready()
    lead.advance(rd)
    lead.advance(rd3)
    later = [m for m in rd3.messages if isinstance(m, AppendRequest)]
    assert len(later) == 2 and all(m.seq > rounds[0].seq for m in later)
    # answers to the first round release r1 and r2 only
    for m in rounds:
        net.cores[m.dst].step(m)
        for out in net.cores[m.dst].ready().messages:
            lead.step(out)
    answered = [rs.ctx for rs in lead.ready().read_states]
    assert answered == ["r1", "r2"]
    for m in later:
        net.cores[m.dst].step(m)
        for out in net.cores[m.dst].ready().messages:
            lead.step(out)
    assert [rs.ctx for rs in lead.ready().read_states] == ["r3"]


def test_campaign_now_skips_pre_vote_and_the_disruption_guard():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    follower = next(c for c in net.cores.values() if c is not lead)
    term = lead.term
    assert follower.campaign_now() == term + 1
    assert follower.role == Role.CANDIDATE  # no pre-vote round first
    net.settle()
    assert follower.role == Role.LEADER and follower.term == term + 1  # granted despite a live leader
    # asked of a leader, it steps down first and campaigns in the next term
    assert follower.campaign_now() == term + 2
    net.settle()
    assert net.leader() is follower and follower.term == term + 2


def test_without_failure_detection_nobody_campaigns_until_asked():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    for c in net.cores.values():
        c.failure_detection = False
    net.down.add(lead.uuid)
    term = lead.term
    net.tick(100)  # ten election timeouts
    assert all(c.term == term and c.role == Role.FOLLOWER for u, c in net.cores.items() if u != lead.uuid)
    survivor = next(c for u, c in net.cores.items() if u != lead.uuid)
    survivor.campaign_now()
    net.settle()
    assert survivor.role == Role.LEADER


def test_max_batch_entries_bounds_each_append_request():
    net = Net(["a", "b", "c"])
    lead = net.elect()
    net.down.update(u for u in net.cores if u != lead.uuid)
    for i in range(5):
        lead.propose(f"w{i}".encode())
    net.settle()
    net.down.clear()
    lead.max_batch_entries = 2
    net.readies[lead.uuid].clear()
    net.tick(4)
    sent = [
        m for r in net.readies[lead.uuid] for m in r.messages if isinstance(m, AppendRequest) and m.entries
    ]
    assert sent and max(len(m.entries) for m in sent) == 2
    assert lead.commit_index == lead.last_index()


class _SnapNet(Net):
    """Net with a state machine per replica (the payloads applied, in order), as the node keeps one: a leader's
    InstallSnapshot carries its state machine, a follower's accepted snapshot replaces its own."""

    def __init__(self, ids: list[str], **kw) -> None:
        super().__init__(ids, **kw)
        self.sm: dict[str, list[bytes]] = {u: [] for u in ids}
        self.installed: dict[str, list[int]] = {u: [] for u in ids}

    def handle(self, u: str, r: Ready) -> None:
        if r.snapshot is not None:  # installed first, as the node does
            self.sm[u] = [bytes.fromhex(x) for x in r.snapshot.data.decode().split(",") if x]
            self.installed[u].append(r.snapshot.index)
        if u not in self.down:
            for m in r.messages:
                if isinstance(m, InstallSnapshot):
                    m = dataclasses.replace(m, data=",".join(x.hex() for x in self.sm[u]).encode())
                self.queue.append(m)
        self.sm[u] += [e.payload for e in r.committed_entries if e.type == EntryType.WRITE]


def _left_behind(install: bool) -> tuple[_SnapNet, RaftCore, str]:
    """A follower down while the leader commits 20 writes and compacts its log past everything it applied."""
    net = _SnapNet(["a", "b", "c"], install_snapshots=install)
    lead = net.elect()
    late = next(u for u in net.cores if u != lead.uuid)
    net.down.add(late)
    for i in range(20):
        lead.propose(b"w%d" % i)
        net.tick()
    net.settle()
    lead.compact(lead.applied_index + 1)
    assert lead.log_start == lead.applied_index + 1 > net.cores[late].last_index() + 1
    net.down.discard(late)
    net.tick(12)
    return net, lead, late


def test_a_follower_behind_the_leaders_log_start_catches_up_by_snapshot():
    net, lead, late = _left_behind(install=True)
    f = net.cores[late]
    assert len(net.installed[late]) == 1 and f.log_start == net.installed[late][0] + 1
    assert f.commit_index == lead.commit_index and f.last_index() == lead.last_index()
    assert net.sm[late] == net.sm[lead.uuid] and len(net.sm[late]) == 20
    assert lead.peer_health()[late] == PeerHealth.HEALTHY
    idx = lead.propose(b"after")  # and it follows by plain appends from then on
    net.tick(3)
    assert f.commit_index >= idx and net.sm[late][-1] == b"after" and len(net.installed[late]) == 1


def test_without_snapshots_a_follower_behind_the_log_start_stays_behind():
    """Kudu's tablet replicas: the leader cannot catch such a peer up; it is FAILED_UNRECOVERABLE until a
    tablet copy replaces it."""
    net, lead, late = _left_behind(install=False)
    assert net.cores[late].commit_index < lead.log_start - 1 and not net.installed[late]
    assert lead.peer_health()[late] == PeerHealth.FAILED_UNRECOVERABLE
    assert not any(isinstance(m, InstallSnapshot) for r in net.readies[lead.uuid] for m in r.messages)


def test_a_leader_holding_its_log_only_from_a_copy_sends_its_snapshot():
    """The masters' case: D leads from a copy (its log starts after the copy's snapshot at 10); L, an old
    leader, holds 1..5 committed and two entries of its own term nobody committed. L takes the snapshot,
    drops its uncommitted tail, and follows D's log."""
    cfg = RaftConfig.of("d", "l", "x")
    opts = Options(election_ticks=10, heartbeat_ticks=2, install_snapshots=True)
    d = RaftCore(
        "d",
        PersistentState(
            HardState(3),
            cfg,
            (Entry(3, 11, EntryType.NO_OP),),
            log_start=11,
            log_start_prev_term=1,
            applied_index=10,
        ),
        opts,
        random.Random(1),
    )
    entries = (
        *(Entry(1, i) for i in range(1, 6)),
        Entry(2, 6, payload=b"lost"),
        Entry(2, 7, payload=b"lost"),
    )
    lag = RaftCore("l", PersistentState(HardState(2), cfg, entries), opts, random.Random(2))
    lag.step(AppendRequest("x", "l", 2, 7, 2, (), commit_index=5))
    drain(lag)
    assert lag.commit_index == 5
    d.campaign_now()
    d.step(VoteResponse("x", "d", d.term, True))
    assert d.role == Role.LEADER
    snaps = []
    for _ in range(20):
        d.tick()
        for m in drain(d).messages:
            if m.dst != "l":
                continue
            if isinstance(m, InstallSnapshot):
                snaps.append(m)
            lag.step(m)
            r = drain(lag)
            if r.snapshot is not None:
                assert r.snapshot.index == 10 and r.snapshot.config == cfg and not r.entries
            for answer in r.messages:
                d.step(answer)
    assert [(m.index, m.snap_term) for m in snaps] == [(10, 1)]
    assert lag.log_start == 11 and lag.term_at(10) == 1 and lag.term_at(6) is None
    assert lag.last_index() == d.last_index() and lag.commit_index == d.commit_index >= 11
    assert all(e.payload != b"lost" for e in lag.log)


def _term_2_follower(last: int, commit: int) -> tuple[RaftConfig, RaftCore]:
    """Follower b of leader a in term 2, holding entries 1..`last` of term 2, `commit` of them committed,
    with snapshots on: the state a snapshot then arrives in."""
    cfg = RaftConfig.of("a", "b")
    f = make("b", cfg, [Entry(2, i) for i in range(1, last + 1)], term=2, install_snapshots=True)
    f.step(AppendRequest("a", "b", 2, last, 2, (), commit_index=commit))
    drain(f)
    return cfg, f


def test_a_snapshot_is_refused_from_an_old_term_and_ignored_below_the_commit_index():
    cfg, f = _term_2_follower(10, commit=10)
    f.step(InstallSnapshot("a", "b", 1, 20, 1, cfg, b"old"))
    r = drain(f)
    assert r.snapshot is None and not r.messages[0].success and f.last_index() == 10
    f.step(InstallSnapshot("a", "b", 2, 8, 2, cfg, b"stale"))
    r = drain(f)
    assert r.snapshot is None and r.messages[0].success and r.messages[0].match_index == 8
    assert f.log_start == 1 and f.last_index() == 10


def test_a_follower_that_holds_the_snapshots_last_entry_keeps_its_log():
    """A stale back-off can make the leader send a snapshot to a follower further along than it thinks:
    entries after the snapshot that the follower already acknowledged must survive it (Raft's Figure 13)."""
    cfg, f = _term_2_follower(12, commit=5)
    f.step(InstallSnapshot("a", "b", 2, 9, 2, cfg, b"snap"))
    r = drain(f)
    assert r.snapshot is None and not r.entries and r.truncate_from is None
    assert r.messages[0].success and r.messages[0].match_index == 9
    assert f.log_start == 1 and f.last_index() == 12 and f.commit_index == 5
