"""The TabletServer gRPC service: the data path (write, read, scan) and replica admin."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

import grpc

from faultline.node.bugs import BugSet
from faultline.node.consensus import RaftError
from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.server.host import HostError, ReplicaHost, abort_not_leader
from faultline.node.server.replica import Indeterminate, Replica, config_from_pb
from faultline.node.server.values import BadValue, check, from_pb, to_pb
from faultline.node.tablet.state import CAS, DELETE, PUT, Op, encode_schema, encode_write

log = logging.getLogger("faultline.node.tserver")

MAX_BATCH = 10_000
_KINDS = {pb.RowOp.PUT: PUT, pb.RowOp.DELETE: DELETE, pb.RowOp.CAS: CAS}


def _deadline(context: grpc.ServicerContext, default: float = 10.0) -> float:
    """Time left for the call, minus a margin so our answer beats the caller's deadline."""
    left = context.time_remaining()
    if left is None:
        return default
    return max(0.05, min(left - 0.1, 60.0))


def parse_ops(ops) -> list[Op]:
    """Protobuf row ops -> state machine ops; BadValue names the first malformed one."""
    if not ops:
        raise BadValue("a write needs at least one row operation")
    if len(ops) > MAX_BATCH:
        raise BadValue(f"a batch holds at most {MAX_BATCH} row operations")
    out = []
    for i, o in enumerate(ops):
        kind = _KINDS.get(o.type)
        if kind is None:
            raise BadValue(f"op {i}: unknown type {o.type}")
        key = from_pb(o.key)
        if key is None:
            raise BadValue(f"op {i}: missing key")
        check(key, "key")
        value = from_pb(o.value)
        if kind == PUT and value is None:
            raise BadValue(f"op {i}: PUT needs a value")
        out.append(Op(kind, key, value, from_pb(o.expected) if kind == CAS else None))
    return out


class TabletServerService(pbg.TabletServerServicer):
    def __init__(self, host: ReplicaHost, bugs: Iterable[str]) -> None:
        self.host = host
        self.bugs = BugSet(bugs)

    def _replica(self, tablet_id: str, context) -> Replica:
        if not tablet_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tablet_id is required")
        r = self.host.get(tablet_id)
        if r is None or r.stopped():
            context.abort(grpc.StatusCode.NOT_FOUND, f"tablet {tablet_id} not found on {self.host.uuid}")
        assert r is not None  # context.abort raised
        return r

    # ------------------------------------------------------------------ data path
    def Write(self, request, context):
        try:
            ops = parse_ops(request.ops)
        except BadValue as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        r = self._replica(request.tablet_id, context)
        if request.schema_version and request.schema_version != r.tablet.schema_version:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"SCHEMA_MISMATCH: tablet has schema version {r.tablet.schema_version}, "
                f"write is for {request.schema_version}",
            )
        try:
            results = r.propose(encode_write(ops, request.schema_version), _deadline(context))
        except RaftError as exc:
            abort_not_leader(context, r, exc)
        except Indeterminate as exc:
            context.abort(grpc.StatusCode.UNKNOWN, f"INDETERMINATE: {exc}")
        return pb.WriteResponse(
            results=[pb.RowResult(ok=x.ok, previous=to_pb(x.previous)) for x in results],
            index=r.tablet.applied_index,
        )

    def _linearizable(self, r: Replica, context) -> None:
        try:
            r.read_index(_deadline(context))
        except RaftError as exc:
            abort_not_leader(context, r, exc)
        except TimeoutError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"read not confirmed: {exc}")

    def Read(self, request, context):
        key = from_pb(request.key)
        if key is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "missing key")
        r = self._replica(request.tablet_id, context)
        self._linearizable(r, context)
        v = r.tablet.get(key)
        return pb.ReadResponse(found=v is not None, value=to_pb(v))

    def Scan(self, request, context):
        r = self._replica(request.tablet_id, context)
        self._linearizable(r, context)
        rows = r.tablet.scan(from_pb(request.start), from_pb(request.end))
        return pb.ScanResponse(rows=[pb.Row(key=to_pb(k), value=to_pb(v)) for k, v in rows])

    # ------------------------------------------------------------------ admin
    def CreateTablet(self, request, context):
        if not request.tablet_id or not request.config.peers:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tablet_id and config are required")
        try:
            self.host.create_replica(
                request.tablet_id,
                request.table_id,
                request.table_name,
                config_from_pb(request.config),
                request.schema_version,
            )
        except HostError as exc:
            context.abort(exc.code, str(exc))
        return pb.CreateTabletResponse()

    def DeleteTablet(self, request, context):
        try:
            self.host.delete_replica(
                request.tablet_id,
                request.tombstone,
                None if request.cas_config_index == -2 else request.cas_config_index,
                request.reason,
            )
        except HostError as exc:
            context.abort(exc.code, str(exc))
        return pb.DeleteTabletResponse()

    def ListTablets(self, request, context):
        return pb.ListTabletsResponse(
            server_uuid=self.host.uuid, replicas=self.host.statuses(request.tablet_id)
        )

    def AlterSchema(self, request, context):
        r = self._replica(request.tablet_id, context)
        if r.tablet.schema_version >= request.schema_version:
            return pb.AlterSchemaResponse()
        try:
            r.propose(encode_schema(request.schema_version), _deadline(context))
        except RaftError as exc:
            abort_not_leader(context, r, exc)
        except Indeterminate as exc:
            context.abort(grpc.StatusCode.UNKNOWN, f"INDETERMINATE: {exc}")
        return pb.AlterSchemaResponse()

    def StartTabletCopy(self, request, context):
        if not request.tablet_id or not request.source_addr:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "tablet_id and source_addr are required")
        if self.host.get(request.tablet_id) is not None:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, f"tablet {request.tablet_id} already runs here")

        def run() -> None:
            try:
                self.host.copy_from(
                    request.tablet_id, request.source_addr, request.table_id, request.table_name
                )
            except Exception as exc:
                log.warning("tablet copy of %s failed: %s", request.tablet_id, exc)

        threading.Thread(target=run, daemon=True, name=f"copy-{request.tablet_id[:8]}").start()
        return pb.StartTabletCopyResponse()
