"""The NATS JetStream plug-in without Docker: the config file each node writes, what the DB declares and
refuses, and how the client's errors become completions (dbs/nats.py)."""

from __future__ import annotations

import argparse

import nats.errors
import nats.js.errors
import pytest
from spec_refusals import assert_refused

from faultline.controller import testspec
from faultline.dbs import get_db
from faultline.dbs.nats import (
    CLIENT_PORT,
    CLUSTER_PORT,
    MONITOR_PORT,
    NatsDB,
    classify,
    config_text,
)
from faultline.workloads.common import completion
from faultline.workloads.registry import supported

WRITE = {"type": "invoke", "f": "add", "value": 7, "process": 0}
READ = {"type": "invoke", "f": "read", "value": None, "process": 0}


def test_each_node_writes_a_config_with_its_name_routes_to_every_node_and_jetstream_in_its_data_dir() -> None:
    text = config_text()
    assert "server_name: {name}" in text and f"listen: 0.0.0.0:{CLIENT_PORT}" in text
    assert f"http: 0.0.0.0:{MONITOR_PORT}" in text  # /healthz: the readiness probe
    assert 'store_dir: "{dir}/data"' in text and f"listen: 0.0.0.0:{CLUSTER_PORT}" in text
    assert [ln.strip() for ln in text.splitlines() if "nats-route://" in ln] == [
        f"nats-route://n{i}:{CLUSTER_PORT}" for i in (1, 2, 3)
    ]
    assert "sync_interval" not in text  # 2.9 refuses the field


def test_the_cluster_spec_runs_three_servers_from_the_config_written_once() -> None:
    from faultline.cluster.base import fill_template

    spec = NatsDB().cluster_spec("fl-x", {})
    (role,) = spec.roles
    assert spec.packages == ["nats-server"] and spec.db == "nats"
    assert role.node_names() == ["n1", "n2", "n3"] and role.argv == [
        "/usr/sbin/nats-server",
        "-c",
        "{dir}/nats.conf",
    ]
    assert role.prepare_unless == "{dir}/nats.conf"  # a restarted node keeps its config and its data
    filled = fill_template(role.prepare, {"dir": "/d/n2", "name": "n2"}, lambda r: [])
    assert "server_name: n2" in filled[5] and 'store_dir: "/d/n2/data"' in filled[5]
    # the disk layer sits under the directory JetStream stores in
    assert NatsDB.data_dirs == {"nats": ("{dir}/data",)}


def test_sync_interval_is_refused_because_nats_server_2_9_has_none() -> None:
    with pytest.raises(ValueError, match=r"came in 2\.10"):
        NatsDB().validate({"sync_interval": "always"})
    assert_refused("sync_interval", db="nats", workload="set", db_opt={"sync_interval": "always"})


def test_it_runs_set_and_queue_and_takes_the_disk_faults_but_not_clock_or_file_damage() -> None:
    db = get_db("nats")
    assert supported(db) == ["set", "queue"]
    for nemesis in ("partition", "kill", "pause", "lose-unfsynced-all", "partition-primary"):
        testspec.build_test({"db": "nats", "workload": "set", "nemesis": nemesis})
    assert_refused("Go program", db="nats", workload="set", nemesis="clock")
    assert_refused("not tried on nats-server", db="nats", workload="set", nemesis="file-bitflip")
    assert_refused("no client for workload 'register'", db="nats", workload="register")


def test_every_db_image_includes_nats_server() -> None:
    from faultline.controller.commands.cluster import _image_packages

    debs, _ = _image_packages(argparse.Namespace(every_db=True, db=None))
    assert "nats-server" in debs


@pytest.mark.parametrize(
    ("exc", "write_type"),
    [
        (nats.errors.NoRespondersError(), "fail"),  # no server took the publish
        (nats.js.errors.NoStreamResponseError(), "fail"),  # nats-py's name for it on a JetStream publish
        (
            nats.js.errors.ServiceUnavailableError(
                code=503, err_code=10008, description="JetStream unavailable"
            ),
            "fail",
        ),
        (
            nats.js.errors.APIError(code=400, err_code=10060, description="expected stream does not match"),
            "fail",
        ),
        (nats.errors.TimeoutError(), "info"),  # the ack never came: it may be stored
        (TimeoutError(), "info"),  # the op timeout around the call
        (nats.errors.ConnectionClosedError(), "info"),
        (nats.errors.UnexpectedEOF(), "info"),
        (RuntimeError("anything else"), "info"),
    ],
)
def test_refusals_fail_and_everything_else_on_a_write_is_indeterminate(
    exc: BaseException, write_type: str
) -> None:
    assert completion(WRITE, classify(exc), read_only=False)["type"] == write_type
    assert completion(READ, classify(exc), read_only=True)["type"] == "fail"  # a read changes nothing


def test_natss_queue_is_checked_as_at_least_once_and_the_others_are_not() -> None:
    """JetStream redelivers a message whose confirmed ack a new consumer leader never saw: a duplicate is
    within what it promises. A Redis list and a PostgreSQL table hand each element out once."""
    from faultline.workloads.registry import get

    history = [
        {"type": "invoke", "f": "enqueue", "value": 1, "process": 0},
        {"type": "ok", "f": "enqueue", "value": 1, "process": 0},
        {"type": "invoke", "f": "dequeue", "value": None, "process": 1},
        {"type": "ok", "f": "dequeue", "value": 1, "process": 1},
        {"type": "invoke", "f": "drain", "value": None, "process": 2},
        {"type": "ok", "f": "drain", "value": [1], "process": 2},
    ]
    nats_result = get("queue", get_db("nats"), {}).checker.check({}, history, {})
    assert nats_result["valid"] is True and nats_result["duplicated"] == [[1, 2]]
    assert nats_result["duplicates_allowed"] is True
    for other in ("redis-sentinel", "postgres"):
        assert get("queue", get_db(other), {}).checker.check({}, history, {})["valid"] is False
