"""The store's admin protocol (dbs/store/admin.py): the CLI admin runs exactly the admin tool commands the
store's faults need on real clusters, and reads their `--json` output through node/tool/output.py."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from faultline.db.nodes import NodeError
from faultline.dbs.store.admin import CliAdmin, ConfigChange, admin_of
from faultline.dbs.store.fake import FakeAdmin, FakeBackend, store_spec
from faultline.node.tool.output import MasterRow, format_master_list

COPY = ["local_replica", "copy_from_remote", "sys", "master-1:7051", "--fs-dir", "/d"]
PREFIX = ["env", "PYTHONPATH=/opt/faultline", "python3", "-m", "faultline.node", "tool"]


class Recorder:
    """A Remote that records each command and answers with the next canned reply."""

    def __init__(self, *replies: tuple[int, str, str]) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[str, list[str], float]] = []

    def exec(self, node: str, argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
        self.calls.append((node, list(argv), timeout))
        return self.replies.pop(0) if self.replies else (0, "", "")


def cli(*replies: tuple[int, str, str]) -> tuple[CliAdmin, Recorder]:
    b = FakeBackend()
    b.up(store_spec(3, 5))
    rec = Recorder(*replies)
    b.remote = rec  # type: ignore[assignment]
    return CliAdmin(b), rec


def test_each_action_runs_the_admin_tool_with_its_arguments() -> None:
    admin, rec = cli()
    m = "master-1:7051,master-2:7051"
    admin.leader_step_down("m1", m, "sys", "u2", 30)
    admin.leader_step_down("m1", m, "tab", None, 60)
    admin.change_config("m1", m, ConfigChange("add_replica", "tab", ("u5",), "NON_VOTER"), 45)
    admin.change_config("m1", m, ConfigChange("move_replica", "tab", ("u1", "u2")), 60)
    admin.unsafe_change_config("t3", "t3:7050", "tab", ["u3"], 60)
    admin.fs_format("m3", "/d", "u9", 60)
    admin.fs_format("m2", "/d", None, 60)
    admin.fs_uuid("m2", "/d", 20)
    admin.rewrite_raft_config("m1", "sys", ["u1:master-1:7051"], "/d", 60)
    admin.copy_from_remote("m3", "sys", "master-1:7051", "/d", ["copy-from-lagging-master"], 120)
    admin.copy_from_remote("m2", "sys", "master-1:7051", "/d", [], 120)
    assert [(node, argv[len(PREFIX) :], t) for node, argv, t in rec.calls] == [
        ("m1", ["tablet", "leader_step_down", m, "sys", "--new-leader", "u2"], 30),
        ("m1", ["tablet", "leader_step_down", m, "tab"], 60),
        ("m1", ["tablet", "change_config", "add_replica", m, "tab", "u5", "--replica-type", "NON_VOTER"], 45),
        ("m1", ["tablet", "change_config", "move_replica", m, "tab", "u1", "u2"], 60),
        ("t3", ["remote_replica", "unsafe_change_config", "t3:7050", "tab", "u3"], 60),
        ("m3", ["fs", "format", "--fs-dir", "/d", "--uuid", "u9"], 60),
        ("m2", ["fs", "format", "--fs-dir", "/d"], 60),
        ("m2", ["fs", "dump", "uuid", "--fs-dir", "/d"], 20),
        (
            "m1",
            ["local_replica", "cmeta", "rewrite_raft_config", "sys", "u1:master-1:7051", "--fs-dir", "/d"],
            60,
        ),
        (
            "m3",
            [*COPY, "--inject-bug", "copy-from-lagging-master"],
            120,
        ),
        ("m2", COPY, 120),
    ]
    assert all(argv[: len(PREFIX)] == PREFIX for _, argv, _ in rec.calls)


def test_listings_are_read_from_the_tools_json_and_failures_are_empty() -> None:
    rows = [MasterRow(uuid="u1", addr="master-1:7051", role="LEADER", voter=True)]
    admin, rec = cli((0, format_master_list(rows, True), ""), (1, "", "no leader"), (0, "garbage", ""))
    assert admin.master_list("t1", "master-1:7051", 10) == rows
    assert admin.master_list("t1", "master-1:7051", 10) == []
    assert admin.master_list("t1", "master-1:7051", 10) == []
    assert rec.calls[0][1][len(PREFIX) :] == ["master", "list", "master-1:7051", "--json"]
    admin, rec = cli(
        (0, '{"healthy": true, "tservers": []}', ""), (1, '{"healthy": true}', ""), (1, "", "down")
    )
    assert admin.ksck("m1", "m", 60) == (True, {"healthy": True, "tservers": []})
    assert admin.ksck("m1", "m", 60)[0] is False
    assert admin.ksck("m1", "m", 60) == (False, {"problems": ["down"]})
    assert rec.calls[0][1][len(PREFIX) :] == ["cluster", "ksck", "m", "--json"]
    admin, rec = cli((1, "", "x"))
    assert admin.table_list("m1", "m", 30) == []
    assert rec.calls[0][1][len(PREFIX) :] == ["table", "list", "m", "--tablets", "--json"]


def test_a_failed_action_checked_names_the_node_and_the_tool() -> None:
    admin, _ = cli((2, "", "boom"))
    with pytest.raises(NodeError, match=r"m2: tool fs format --fs-dir failed \(exit 2\): boom"):
        admin.fs_format("m2", "/d", None, 60).checked("m2")


def test_the_fake_backend_brings_its_own_admin_and_others_get_the_cli() -> None:
    b = FakeBackend()
    assert isinstance(admin_of(b), FakeAdmin)
    assert isinstance(admin_of(object()), CliAdmin)  # type: ignore[arg-type]
