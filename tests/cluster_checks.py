"""What the backend tests (tests/test_cluster_*.py) share: a cluster for a fixture's lifetime, and the
daemon lifecycle every backend must follow."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def brought_up(backend: Any) -> Iterator[Any]:
    """`backend` up for the with-block, and down after it even when the block or `up` failed."""
    try:
        backend.up()
        yield backend
    finally:
        backend.down()


def assert_pause_kill_start(cluster: Any, node: str, probe_from: str, port: int) -> None:
    """Pause, resume, kill and start `node`'s daemon: its status follows each step, and after the start it
    serves on `port` again, as seen from `probe_from`."""
    cluster.pause(node)
    assert cluster.daemon_status(node) == "paused"
    cluster.resume(node)
    cluster.kill(node)
    assert cluster.daemon_status(node) == "stopped"
    cluster.start(node)
    assert cluster.wait_port(probe_from, node, port, 10)
