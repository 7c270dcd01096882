"""A DB whose process cannot start (etcd with a flag it does not know): for the test that a failed start
is one clear error with the tail of the process's log, and that the cluster is torn down."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultline.cluster.base import ClusterSpec
from faultline.dbs.etcd import EtcdDB


class BrokenEtcd(EtcdDB):
    name = "broken-etcd"

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        spec = super().cluster_spec(name, opts)
        spec.roles[0].argv.append("--no-such-flag-for-this-test")
        spec.db = self.name
        return spec
