"""The DB protocol, after Jepsen's db.clj: the core every system under test implements and the capabilities
it offers à la carte (`api.py`), and `ProcessDB` (`process.py`), every capability for a DB whose nodes each
run one process. It sits below the generic faults and workloads, which reach a DB only through it; the
plug-ins that implement it (the bundled store, etcd, Redis, PostgreSQL, ...) live in `dbs/`, above them."""
