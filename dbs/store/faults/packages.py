"""The store's own nemesis packages, offered through `StoreDB.nemesis_entries` (nemesis.api.OffersNemeses):
faults aimed at one kind of its leaders, shape changes through its admin tools (topology.py), staged
elections (elections.py), learners (learner.py), leader blips (blip.py) and power loss (power.py)."""

from __future__ import annotations

from collections.abc import Sequence

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


def entries() -> list[Entry]:
    """The store's faults, by the names users type."""
    return [
        # the leader shape aimed at one kind of leader: a tablet's (stale reads) or the masters' (catalog)
        Entry(
            "partition-tablet-leader",
            "a tablet leader cut off",
            lambda b: partition_package(["leader"], b.interval_s, targets=("tservers",)),
        ),
        Entry(
            "partition-master-leader",
            "the leader master cut off",
            lambda b: partition_package(["leader"], b.interval_s, targets=("masters",)),
        ),
        Entry(
            "membership",
            "replica adds, removals, moves and leader step-downs",
            lambda b: one_shot_package(
                topology.MembershipNemesis(), "membership", b.interval_s / 2, _membership_value
            ),
        ),
        # once a run: a second replacement would start while the first still settles (the op takes 10-35 s),
        # and the catalog checker's timed rules judge the quiet stretch after it
        Entry(
            "master-replace",
            "a master replaced for good, once",
            lambda b: one_shot_package(
                topology.MasterReplaceNemesis(),
                "replace-master",
                b.interval_s,
                times=1,
                repairs=topology.master_repairs("replace-master"),
            ),
        ),
        # once a run: the catalog checker's timed rules judge the quiet stretch after it
        Entry(
            "master-leader-return",
            "the masters' leadership handed away and back once, with no fault",
            lambda b: one_shot_package(
                topology.MasterLeaderReturnNemesis(), "master-leader-return", b.interval_s, times=1
            ),
        ),
        # a master replaced while the old leader is cut off, then the cut moves (KUDU-1556's case, staged)
        Entry(
            "master-replace-lagging",
            "a master replaced while the old leader lags, cut off",
            lambda b: one_shot_package(
                topology.MasterReplaceLaggingNemesis(),
                "replace-master-lagging",
                b.interval_s,
                repairs=topology.master_repairs("replace-master-lagging"),
            ),
        ),
        Entry(
            "master-migrate",
            "one master to three, needs --masters 1",
            lambda b: one_shot_package(
                topology.MasterMigrateNemesis(), "migrate-masters", b.interval_s, times=1
            ),
        ),
        Entry(
            "tserver-replace",
            "a tablet server replaced for good",
            lambda b: one_shot_package(topology.TserverReplaceNemesis(), "replace-tserver", b.interval_s),
        ),
        Entry(
            "majority-loss",
            "a tablet majority lost, recovered by unsafe_change_config",
            lambda b: one_shot_package(
                topology.MajorityLossNemesis(),
                "majority-loss",
                b.interval_s,
                times=1,
                then=[topology.UNSAFE_CHANGE_CONFIG],
                repairs=[topology.UNSAFE_CHANGE_CONFIG],
            ),
        ),
        Entry(
            "power-loss",
            "power cuts on tablet servers",
            lambda b: power_loss_package(power.PACKAGE_SUBSETS, b.interval_s),
        ),
        Entry(
            "power-loss-tablet",
            "power cuts on every replica of one tablet",
            lambda b: power_loss_package(("tablet-all",), b.interval_s),
        ),
        Entry(
            "learner-partition",
            "a new learner cut off with its tablet's leader",
            lambda b: learner_partition_package(b.interval_s),
        ),
        Entry(
            "leader-blip",
            "a tablet leader cut off until a new one is elected",
            lambda b: one_shot_package(blip.LeaderBlipNemesis(), "leader-blip", b.interval_s),
        ),
        # staged elections on one tablet (elections.py)
        Entry(
            "vote-crash",
            "a voter crashes after voting, asked again in the same term",
            lambda b: one_shot_package(elections.VoteCrashNemesis(), "vote-crash", b.interval_s),
        ),
        Entry(
            "figure-8",
            "the Raft paper's Figure 8, staged",
            lambda b: one_shot_package(elections.Figure8Nemesis(), "figure-8", b.interval_s),
        ),
    ]
