"""The store's cluster layout: its roles, ports, movable master DNS names, data directory, and how its
admin tools are run on a node. Shared by the DB class, its faults, its tools and its fake."""

from __future__ import annotations

from collections.abc import Sequence

MASTER = "master"
TSERVER = "tserver"
MASTER_PORT = 7051
TSERVER_PORT = 7050
DAEMONS = ("node", "placeholder", "none")
DATA = "{dir}/data"


def master_dns(i: int) -> str:
    """The DNS name of the i-th master (1-based): a name the permanent-master-failure procedure moves."""
    return f"master-{i}"


def tool_argv(args: Sequence[str]) -> list[str]:
    """`python -m faultline.node tool ARGS` as a role template (see RoleSpec)."""
    return ["{python}", "-m", "faultline.node", "tool", *args]
