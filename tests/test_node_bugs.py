"""The bug registry is one enumeration: a misspelt bug is an error everywhere, never a check that silently
stays off. Also the admin tools' `--json` format and its one parser (node/tool/output.py), offline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_runs import ROOT, run_module

from faultline.node import bugs
from faultline.node.bugs import BUGS, Bug, BugSet, UnknownBug
from faultline.node.consensus import CORE_BUGS, Options, RaftConfig, RaftCore
from faultline.node.consensus.sim import SimOptions
from faultline.node.consensus.types import HardState, PersistentState
from faultline.node.log import Wal
from faultline.node.server.replica import DriverOptions
from faultline.node.tool import output

# The spellings users type (`--inject-bug`, campaign `bug_sets`): renaming one breaks campaigns.
SPELLINGS = {
    "commit-prior-term",
    "count-nonvoter-acks",
    "vote-not-durable",
    "follower-commit-past-batch",
    "no-vote-withholding",
    "stale-leader-reads",
    "no-fsync",
    "cold-tserver-cache",
    "edge-triggered-reports",
    "no-dns-reresolve",
    "copy-from-lagging-master",
    "no-wal-checksum",
}


def test_the_registry_is_the_enumeration_with_the_same_spellings() -> None:
    assert {b.value for b in Bug} == SPELLINGS == set(BUGS)
    assert all(type(k) is str and BUGS[k] == Bug(k).description and BUGS[k] for k in BUGS)
    assert Bug.NO_FSYNC == "no-fsync" and f"{Bug.NO_FSYNC}" == "no-fsync" and Bug("no-fsync") is Bug.NO_FSYNC
    assert set(CORE_BUGS) <= set(Bug) and all(isinstance(b, Bug) for b in CORE_BUGS)


def test_an_unknown_bug_name_is_refused_by_validation() -> None:
    assert bugs.validate(["no-fsync", "stale-leader-reads"]) == ["no-fsync", "stale-leader-reads"]
    with pytest.raises(UnknownBug, match=r"unknown bug 'no-fsnyc'; valid: .*no-fsync"):
        bugs.validate(["no-fsync", "no-fsnyc"])
    with pytest.raises(ValueError):  # callers that catch ValueError keep working
        bugs.validate(["nonsense"])
    with pytest.raises(UnknownBug):
        BugSet(["no-fsync", "no_fsync"])


def test_an_unknown_bug_name_is_refused_by_the_in_code_check() -> None:
    on = BugSet(["no-fsync"])
    assert on.enabled(Bug.NO_FSYNC) and not on.enabled(Bug.STALE_LEADER_READS)
    assert on.enabled("no-fsync")  # type: ignore[arg-type]  # the spelling of a member is still that member
    for typo in ("no-fsnyc", "NO_FSYNC", "", None):
        with pytest.raises(UnknownBug):
            on.enabled(typo)  # type: ignore[arg-type]
        with pytest.raises(UnknownBug):
            _ = typo in on  # a plain membership test validates too
    with pytest.raises(UnknownBug):
        BugSet().enabled("stale-leader-read")  # type: ignore[arg-type]


def test_options_refuse_an_unknown_bug_when_made() -> None:
    assert Options(bugs=frozenset({"commit-prior-term"})).bugs.enabled(Bug.COMMIT_PRIOR_TERM)
    for make in (lambda b: Options(bugs=b), lambda b: SimOptions(bugs=b), lambda b: DriverOptions(bugs=b)):
        assert isinstance(make(frozenset({"no-fsync"})).bugs, BugSet)
        with pytest.raises(UnknownBug):
            make(frozenset({"commit-prior-trem"}))
    core = RaftCore(
        "a",
        PersistentState(HardState(0, None), RaftConfig.of("a", "b", "c")),
        Options(bugs=frozenset({Bug.STALE_LEADER_READS})),
    )
    assert core.bugs.enabled(Bug.STALE_LEADER_READS) and not core.bugs.enabled(Bug.COMMIT_PRIOR_TERM)


def test_the_wal_refuses_an_unknown_bug(tmp_path: Path) -> None:
    with Wal(tmp_path / "ok", bugs={"no-fsync"}) as w:
        assert not w.sync
    with pytest.raises(UnknownBug):
        Wal(tmp_path / "typo", bugs={"no-fsinc"})


def test_node_code_asks_with_members_only() -> None:
    """No string-literal bug check is left in node/, and every bug is checked somewhere."""
    sources = {
        p: p.read_text()
        for p in (ROOT / "node").rglob("*.py")
        if p.name != "bugs.py" and not p.name.endswith(("_pb2.py", "_pb2_grpc.py"))
    }
    names = "|".join(re.escape(s) for s in SPELLINGS)
    literal = re.compile(r"""["'](""" + names + r""")["']\s+(not\s+)?in\b""")
    assert not [f"{p}: {m.group(0)}" for p, text in sources.items() for m in literal.finditer(text)]
    used = {m for text in sources.values() for m in re.findall(r"\bBug\.([A-Z_]+)\b", text)}
    assert used == {b.name for b in Bug}


def test_the_tool_refuses_an_unknown_injected_bug(tmp_path: Path) -> None:
    copy = ("tool", "local_replica", "copy_from_remote", "sys", "127.0.0.1:1", "--fs-dir", str(tmp_path))
    r = run_module("faultline.node", *copy, "--inject-bug", "copy-from-lagging-mastr", timeout=30)
    assert r.returncode == 254 and "unknown bug 'copy-from-lagging-mastr'" in r.stderr


# ---------------------------------------------------------------------- --json output and its parser
MASTERS = [
    output.MasterRow(uuid="a" * 32, addr="master-1:7051", role="LEADER", voter=True),
    output.MasterRow(uuid="b" * 32, addr="master-2:7051", role="FOLLOWER", voter=False),
]
TABLES = [
    output.TableRow(
        name="t",
        tablets=[
            output.TabletRow(
                tablet_id="c" * 32,
                partition=1,
                state="RUNNING",
                replicas=[
                    output.ReplicaRow(uuid="d" * 32, addr="t1:7050", role="LEADER", voter=True),
                    output.ReplicaRow(uuid="e" * 32, addr="t2:7050", role="FOLLOWER", voter=True),
                ],
            )
        ],
    )
]


def test_json_round_trips_through_the_one_parser() -> None:
    js = output.format_master_list(MASTERS, as_json=True)
    assert js.count("\n") == 1 and js.startswith('{"masters": [')
    assert output.parse_master_list(js) == MASTERS
    assert output.parse_table_list(output.format_table_list(TABLES, as_json=True)) == TABLES
    bare = [output.TableRow(name="t")]
    assert output.parse_table_list(output.format_table_list(bare, as_json=True)) == bare
    local = [output.LocalReplicaRow(tablet_id="c" * 32, state="RUNNING", table="t")]
    assert output.parse_local_replicas(output.format_local_replicas(local, as_json=True)) == local
    remote = [
        output.RemoteReplicaRow(
            tablet_id="c" * 32,
            table="t",
            state="RUNNING",
            role="LEADER",
            term=3,
            leader_uuid="d" * 32,
            commit_index=9,
            last_index=9,
            config_index=4,
            voters=["d" * 32, "e" * 32],
            non_voters=[],
        )
    ]
    assert output.parse_remote_replicas(output.format_remote_replicas(remote, as_json=True)) == remote
    # a stray line ahead of the document (a remote shell's greeting) does no harm
    assert output.parse_master_list("motd\n" + js) == MASTERS


def test_the_text_form_is_unchanged_for_people() -> None:
    assert output.format_master_list(MASTERS) == (
        f"{'a' * 32} master-1:7051 LEADER\n{'b' * 32} master-2:7051 FOLLOWER (non-voter)\n"
    )
    assert (
        output.format_table_list(TABLES)
        == f"t\n  {'c' * 32} p1 RUNNING {'d' * 32}:LEADER {'e' * 32}:FOLLOWER\n"
    )
    assert output.format_table_list([output.TableRow(name="t")]) == "t\n"


@pytest.mark.parametrize("bad", ["", "uuid addr LEADER\n", '{"tables": []}', '{"masters": {}}', "[1]"])
def test_the_parser_refuses_what_is_not_the_json_form(bad: str) -> None:
    with pytest.raises(ValueError):
        output.parse_master_list(bad)
