"""gRPC messages and services of the DBs the harness talks to over gRPC (etcd's KV and Maintenance
APIs), generated from the .proto files here like the node's (node/protos)."""

from faultline.node.protos._compile import stale_protos

if any(p.parent.name == "protos" and p.parent.parent.name == "dbs" for p in stale_protos()):
    try:
        from faultline.node.protos._compile import compile_protos

        compile_protos(only_stale=True)
    except ImportError as exc:  # grpcio-tools absent: an installed wheel ships the stubs
        raise ImportError(
            "dbs/protos stubs are missing and grpcio-tools is not installed; run `make stubs`"
        ) from exc
