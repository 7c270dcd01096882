"""gRPC messages and services of the node, generated from the .proto files here.

In a source checkout or an editable install, stubs that are missing or older
than their .proto are regenerated on import (needs grpcio-tools); an installed
wheel already carries them.
"""

from faultline.node.protos._compile import stale_protos

if stale_protos():
    try:
        from faultline.node.protos._compile import compile_protos

        compile_protos(only_stale=True)
    except ImportError as exc:  # grpcio-tools absent: an installed wheel ships the stubs
        raise ImportError(
            "node/protos stubs are missing and grpcio-tools is not installed; run `make stubs`"
        ) from exc
