"""The nodes of a run, as the DB and its cluster tell them: by role, the primaries and leaders the DB reports,
and one that answers. The generic faults aim with these, and so does a DB plug-in's own admin code (the
store's tools find a node to run a tool from), which is why they live in the DB protocol's layer, below both.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from faultline.cluster.api import ClusterBackend
from faultline.core import Run
from faultline.db.api import Leaders, Primaries

log = logging.getLogger("faultline.db")

PRIMARIES = "primaries"


class NodeError(RuntimeError):
    """A node could not be reached, or what was asked of it failed; the message names the step."""


def backend(test: Run) -> ClusterBackend:
    b = test.backend
    if b is None:
        raise NodeError("the test has no cluster backend")
    return b


def target_roles(test: Run) -> Mapping[str, str]:
    """The targets the DB's nodes fall into beyond `all` and `primaries` (db.api.Leaders.target_roles:
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


def first_up(test: Run, nodes: Sequence[str]) -> str:
    """A node to run a tool from: any of `nodes` that answers a trivial command."""
    b = backend(test)
    for n in nodes:
        try:
            if b.remote.exec(n, ["true"], 10)[0] == 0:
                return n
        except Exception:
            continue
    raise NodeError(f"no reachable node among {', '.join(nodes)}")
