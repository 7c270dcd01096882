"""DB modules: what runs on a cluster's hosts and how the harness talks to it (after Jepsen's db
protocol, db/api.py). The bundled store is the default; a user's own DB is named by import path."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from faultline.db.api import DB

if TYPE_CHECKING:
    from faultline.nemesis.api import Entry as NemesisEntry
    from faultline.workloads.api import Entry as WorkloadEntry

DEFAULT = "store"
# name -> "module:attribute" of a DB object or class; loaded on first use so a DB's client libraries are
# imported only when it is chosen.
REGISTRY: dict[str, str] = {
    "store": "faultline.dbs.store:StoreDB",
    "etcd": "faultline.dbs.etcd:EtcdDB",
    "redis-sentinel": "faultline.dbs.redis:RedisSentinelDB",
    "postgres": "faultline.dbs.postgres:PostgresDB",
    "mariadb": "faultline.dbs.mariadb:MariaDBDB",
    "nats": "faultline.dbs.nats:NatsDB",
}


class UnknownDB(ValueError):
    """A --db that is neither a registered name nor an importable `package.module:Attribute`."""


def names() -> list[str]:
    return list(REGISTRY)


def get_db(spec: str | None = None) -> DB:
    """The DB named `spec`: a registered name (`store`) or `package.module:Attribute` (a DB class,
    instantiated with no arguments, or a DB object)."""
    spec = spec or DEFAULT
    target = REGISTRY.get(spec, spec)
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UnknownDB(f"unknown DB {spec!r}; valid: {', '.join(REGISTRY)}, or package.module:Attribute")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownDB(f"DB {spec!r}: cannot import module {module_name} ({exc})") from None
    except Exception as exc:  # the user's module raised while importing: name it, no traceback
        raise UnknownDB(
            f"DB {spec!r}: importing module {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise UnknownDB(f"DB {spec!r}: {module_name} has no {attr}") from None
    db = obj() if isinstance(obj, type) else obj
    # the DB core protocol's methods (db/api.py); capabilities (Kill, Primaries, LogFiles ...) are optional
    core = ("cluster_spec", "validate", "setup", "teardown", "client_nodes", "connector", "client")
    missing = [m for m in core if not callable(getattr(db, m, None))]
    if missing:
        raise UnknownDB(f"DB {spec!r} is not a DB: it lacks {', '.join(missing)} (see docs/architecture.md)")
    return cast(DB, db)  # a user's object, checked above for the core protocol's methods


def loadable() -> list[DB]:
    """Every registered DB this installation can load (one whose module cannot be imported here is left
    out), for help texts and campaign files, which name what any DB offers."""
    out = []
    for name in REGISTRY:
        try:
            out.append(get_db(name))
        except UnknownDB:
            continue
    return out


def every_nemesis() -> dict[str, NemesisEntry]:
    """The generic faults and those of every loadable DB, for help texts, campaign files and the hint that a
    fault belongs to another DB (the generic registry knows no DB; this layer names them)."""
    from faultline.nemesis.registry import all_entries

    return all_entries(loadable())


def every_workload() -> dict[str, WorkloadEntry]:
    """The generic workloads and those of every loadable DB, likewise."""
    from faultline.workloads.registry import all_entries

    return all_entries(loadable())


def all_bugs() -> dict[str, str]:
    """The injectable bugs of every loadable DB that has them (db.api.Bugs), by name."""
    from faultline.db.api import Bugs

    out: dict[str, str] = {}
    for db in loadable():
        if isinstance(db, Bugs):
            out.update({k: v for k, v in db.bugs.items() if k not in out})
    return out
