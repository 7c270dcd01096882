"""The store's own nemesis packages, offered through `StoreDB.nemesis_entries` (nemesis.api.OffersNemeses):
faults aimed at one kind of its leaders, shape changes through its admin tools (topology.py), staged
elections (elections.py), learners (learner.py), leader blips (blip.py) and power loss (power.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from faultline import gen
from faultline.dbs.store.faults import blip, elections, learner, power, topology
from faultline.nemesis.api import Entry, NemesisPackage
from faultline.nemesis.registry import one_shot_package, partition_package, start_stop


def power_loss_package(subsets: Sequence[str], interval_s: float) -> NemesisPackage:
    """Power cuts on tablet servers every other interval, sized at random among `subsets` (the run's
    seed decides). `power-loss-tablet` always cuts every replica of one tablet: a cut of only a majority
    loses unsynced data only when the next leader is one of the cut replicas (it missed the `no-fsync`
    bug in 1 of 3 runs), a cut of all of them loses it every time."""
    sched, final = start_stop("power-loss", {"targets": ("tservers",), "subset": subsets}, interval_s)
    return NemesisPackage(nemesis=power.PowerLossNemesis(), generator=sched, final_generator=final)


def learner_partition_package(interval_s: float) -> NemesisPackage:
    """A NON_VOTER added to one tablet, then that tablet's leader and the learner cut off together from the
    other voters (learner.py); stop heals and removes the learner."""
    sched, final = start_stop("learner-partition", {}, interval_s)
    return NemesisPackage(nemesis=learner.LearnerPartitionNemesis(), generator=sched, final_generator=final)


def _membership_value(ctx: gen.Context) -> dict[str, str]:
    return {"action": ctx.rng.choice(["leader-step-down", "add-replica", "remove-replica", "move-replica"])}


def _one_shot(name: str, doc: str, make: Callable[[], Any], f: str, every: float = 1.0, **kw: Any) -> Entry:
    """An entry whose package runs the nemesis `make()` builds, one op `f` every `every` intervals (`kw`:
    one_shot_package's times, value, then, repairs)."""
    return Entry(name, doc, lambda b: one_shot_package(make(), f, b.interval_s * every, **kw))


def _leader_partition(name: str, doc: str, targets: str) -> Entry:
    return Entry(name, doc, lambda b: partition_package(["leader"], b.interval_s, targets=(targets,)))


def _power_loss(name: str, doc: str, subsets: Sequence[str]) -> Entry:
    return Entry(name, doc, lambda b: power_loss_package(subsets, b.interval_s))


def _topology_entries() -> list[Entry]:
    """The faults that change the cluster's shape through the admin tools (topology.py)."""
    once = {"times": 1}
    return [
        _one_shot(
            "membership",
            "replica adds, removals, moves and leader step-downs",
            topology.MembershipNemesis,
            "membership",
            every=0.5,
            value=_membership_value,
        ),
        # once a run: a second replacement would start while the first still settles (the op takes 10-35 s),
        # and the catalog checker's timed rules judge the quiet stretch after it
        _one_shot(
            "master-replace",
            "a master replaced for good, once",
            topology.MasterReplaceNemesis,
            "replace-master",
            repairs=topology.master_repairs("replace-master"),
            **once,
        ),
        # once a run: the catalog checker's timed rules judge the quiet stretch after it
        _one_shot(
            "master-leader-return",
            "the masters' leadership handed away and back once, with no fault",
            topology.MasterLeaderReturnNemesis,
            "master-leader-return",
            **once,
        ),
        # a master replaced while the old leader is cut off, then the cut moves (KUDU-1556's case, staged)
        _one_shot(
            "master-replace-lagging",
            "a master replaced while the old leader lags, cut off",
            topology.MasterReplaceLaggingNemesis,
            "replace-master-lagging",
            repairs=topology.master_repairs("replace-master-lagging"),
        ),
        _one_shot(
            "master-migrate",
            "one master to three, needs --db-opt masters=1",
            topology.MasterMigrateNemesis,
            "migrate-masters",
            **once,
        ),
        _one_shot(
            "tserver-replace",
            "a tablet server replaced for good",
            topology.TserverReplaceNemesis,
            "replace-tserver",
        ),
        _one_shot(
            "majority-loss",
            "a tablet majority lost, recovered by unsafe_change_config",
            topology.MajorityLossNemesis,
            "majority-loss",
            then=[topology.UNSAFE_CHANGE_CONFIG],
            repairs=[topology.UNSAFE_CHANGE_CONFIG],
            **once,
        ),
    ]


def entries() -> list[Entry]:
    """The store's faults, by the names users type."""
    return [
        # the leader shape aimed at one kind of leader: a tablet's (stale reads) or the masters' (catalog)
        _leader_partition("partition-tablet-leader", "a tablet leader cut off", "tservers"),
        _leader_partition("partition-master-leader", "the leader master cut off", "masters"),
        *_topology_entries(),
        _power_loss("power-loss", "power cuts on tablet servers", power.PACKAGE_SUBSETS),
        _power_loss("power-loss-tablet", "power cuts on every replica of one tablet", ("tablet-all",)),
        Entry(
            "learner-partition",
            "a new learner cut off with its tablet's leader",
            lambda b: learner_partition_package(b.interval_s),
        ),
        _one_shot(
            "leader-blip",
            "a tablet leader cut off until a new one is elected",
            blip.LeaderBlipNemesis,
            "leader-blip",
        ),
        # staged elections on one tablet (elections.py)
        _one_shot(
            "vote-crash",
            "a voter crashes after voting, asked again in the same term",
            elections.VoteCrashNemesis,
            "vote-crash",
        ),
        _one_shot("figure-8", "the Raft paper's Figure 8, staged", elections.Figure8Nemesis, "figure-8"),
    ]
