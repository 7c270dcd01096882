"""What the generic nemeses share: choosing nodes, asking the DB who leads, and recording what was done.

A generic fault reaches a DB only through the DB protocol's capabilities (dbs/api.py): the roles its
nodes fall into and its leaders (`Leaders`), its primaries (`Primaries`); it never tests which DB it holds.
Faults of one DB (the store's master replacement, elections, ...) live with that DB (dbs/store/faults/).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from faultline.cluster.api import ClusterBackend
from faultline.core import Op, Run
from faultline.dbs.api import Leaders, Primaries
from faultline.gen import Context

log = logging.getLogger("faultline.nemesis")

ROLES = ("masters", "tservers", "all")
PRIMARIES = "primaries"
SUBSETS = ("one", "minority", "majority", "all", "leaders")


class NemesisError(RuntimeError):
    """A fault could not be applied or healed; the message names the step."""


def backend(test: Run) -> ClusterBackend:
    b = test.backend
    if b is None:
        raise NemesisError("the test has no cluster backend")
    return b


def nemesis_rng(test: Run, salt: str) -> random.Random:
    """A generator of the run's seed, one per nemesis, so choices replay with the seed."""
    return random.Random(f"{test.spec.seed}:{salt}")


def target_roles(test: Run) -> Mapping[str, str]:
    """The targets the DB's nodes fall into beyond `all` and `primaries` (dbs.api.Leaders.target_roles:
    the store's masters and tservers), each mapped to its cluster role; empty for a DB of one role."""
    return test.db.target_roles if isinstance(test.db, Leaders) else {}


def role_nodes(test: Run, role: str) -> list[str]:
    """The live (not destroyed) nodes of a target: those of a role the DB names (the store's masters or
    tservers), the DB's primaries (as it reports them), or all. A target the DB does not name means all
    its nodes."""
    b = backend(test)
    if role == PRIMARIES:
        return sorted(set(primaries(test)) & set(b.nodes()))
    cluster_role = target_roles(test).get(role)
    return sorted(b.nodes(cluster_role) if cluster_role else b.nodes())


def targets_of(test: Run, value: Mapping[str, Any]) -> str:
    """The op's `targets`, as the history should name them: a target the DB does not name is `all`."""
    targets = str(value.get("targets", "all"))
    return targets if targets in ("all", PRIMARIES) or targets in target_roles(test) else "all"


def leaders(test: Run, targets: str) -> list[str]:
    """The leaders a `leaders` subset hits: the DB's own answer for `targets` when it has leaders of
    several kinds, else its primaries."""
    if targets != PRIMARIES and isinstance(test.db, Leaders):
        try:
            return list(test.db.leaders(test, targets))
        except Exception as exc:
            log.warning("cannot ask the DB for its leaders: %s", exc)
            return []
    return primaries(test)


def primaries(test: Run) -> list[str]:
    """The nodes the DB says lead now (the store: the leader master); [] when it cannot say."""
    if not isinstance(test.db, Primaries):
        return []
    try:
        return list(test.db.primaries(test))
    except Exception as exc:
        log.warning("cannot ask the DB for its primaries: %s", exc)
        return []


def pick_subset(
    nodes: Sequence[str], subset: str, rng: random.Random, leaders: Sequence[str] = ()
) -> list[str]:
    nodes = sorted(nodes)
    if not nodes:
        return []
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    if subset == "one":
        return shuffled[:1]
    if subset == "minority":
        return sorted(shuffled[: max(1, (len(nodes) - 1) // 2)])
    if subset == "majority":
        return sorted(shuffled[: len(nodes) // 2 + 1])
    if subset == "all":
        return nodes
    if subset == "leaders":
        return sorted(set(leaders) & set(nodes)) or shuffled[:1]
    raise ValueError(f"unknown node subset {subset!r}; valid: {', '.join(SUBSETS)}")


def first_up(test: Run, nodes: Sequence[str]) -> str:
    """A node to run a tool from: any of `nodes` that answers a trivial command."""
    b = backend(test)
    for n in nodes:
        try:
            if b.remote.exec(n, ["true"], 10)[0] == 0:
                return n
        except Exception:
            continue
    raise NemesisError(f"no reachable node among {', '.join(nodes)}")


def wait_until(pred: Callable[[], bool], timeout_s: float, interval_s: float = 1.0, what: str = "") -> bool:
    """Polls `pred` until true or the deadline; bounded in time and count."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / max(interval_s, 0.01)) + 2):
        try:
            if pred():
                return True
        except Exception as exc:
            log.info("waiting for %s: %s", what, exc)
        if time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    return False


def bring_back(nodes: set[str], lock: Any, action: Callable[[str], Any], what: str) -> list[str]:
    """Runs `action` (start, resume, ...) on every node still in `nodes`, removing each one that came
    back; a node that failed stays in the set for the next heal. Raises NemesisError naming every failure
    after trying them all."""
    with lock:
        pending = sorted(nodes)
    errors = []
    for n in pending:
        try:
            action(n)
            with lock:
                nodes.discard(n)
        except Exception as exc:
            errors.append(f"{n}: {exc}")
    if errors:
        raise NemesisError(f"could not {what}: {'; '.join(errors)}")
    return pending


def done(op: Op, value: Any = None, kind: str = "ok", **extra: Any) -> Op:
    # `kind` is an op type and `extra` holds op fields (`error`, ...): the completion is an Op
    out = cast(Op, {**op, "type": kind, **extra})
    if value is not None:
        out["value"] = value
    return out


def choice_op(f: str, choices: Mapping[str, Sequence[Any]]) -> Callable[[Context], Op]:
    """An op whose value draws each field from its choices with the run's randomness."""

    def make(ctx: Context) -> Op:
        return {"f": f, "value": {k: ctx.rng.choice(list(v)) for k, v in choices.items()}}

    return make
