"""The store's client library: `KuduClient` and its errors (see docs/node.md)."""

from faultline.node.client.client import (
    AlreadyExistsError,
    IndeterminateError,
    InvalidArgumentError,
    KuduClient,
    KuduError,
    KuduTable,
    NotFoundError,
    UnavailableError,
    catalog_lags,
)

__all__ = [
    "AlreadyExistsError",
    "IndeterminateError",
    "InvalidArgumentError",
    "KuduClient",
    "KuduError",
    "KuduTable",
    "NotFoundError",
    "UnavailableError",
    "catalog_lags",
]
