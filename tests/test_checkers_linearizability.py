"""The linearizability checker: small cases, semantics, evidence, engines agree, property tests."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from faultline.checkers import linearizability
from faultline.checkers.linearizability import Linearizable, check

HAVE_C = linearizability._wgl is not None
ENGINES = [True, False] if HAVE_C else [False]


def h(*events: tuple[Any, ...]) -> list[dict[str, Any]]:
    """(process, type, f, value[, key]) tuples -> history ops."""
    out = []
    for i, e in enumerate(events):
        op = {"index": i, "time": i * 1000, "process": e[0], "type": e[1], "f": e[2], "value": e[3]}
        if len(e) > 4:
            op["key"] = e[4]
        out.append(op)
    return out


@pytest.mark.parametrize("use_c", ENGINES)
def test_sequential_and_concurrent_cases(use_c: bool) -> None:
    ok = h(
        (0, "invoke", "write", 1), (0, "ok", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 1)
    )
    assert check(ok, "register", init=0, use_c=use_c)["valid"] is True
    stale = h(
        (0, "invoke", "write", 1), (0, "ok", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 0)
    )
    r = check(stale, "register", init=0, use_c=use_c)
    assert r["valid"] is False
    assert r["failure"]["op"]["f"] == "read" and r["failure"]["op"]["value"] == 0
    assert r["failure"]["final_states"] == [1]
    # A read concurrent with the write may see either value.
    conc = h(
        (0, "invoke", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 0), (0, "ok", "write", 1)
    )
    assert check(conc, "register", init=0, use_c=use_c)["valid"] is True


@pytest.mark.parametrize("use_c", ENGINES)
def test_info_write_may_or_may_not_happen(use_c: bool) -> None:
    happened = h(
        (0, "invoke", "write", 2), (0, "info", "write", 2), (1, "invoke", "read", None), (1, "ok", "read", 2)
    )
    not_happened = h(
        (0, "invoke", "write", 2), (0, "info", "write", 2), (1, "invoke", "read", None), (1, "ok", "read", 0)
    )
    assert check(happened, "cas-register", init=0, use_c=use_c)["valid"] is True
    assert check(not_happened, "cas-register", init=0, use_c=use_c)["valid"] is True
    # A failed write did not happen (jepsen semantics), so reading its value is impossible.
    failed = h(
        (0, "invoke", "write", 2), (0, "fail", "write", 2), (1, "invoke", "read", None), (1, "ok", "read", 2)
    )
    assert check(failed, "cas-register", init=0, use_c=use_c)["valid"] is False


@pytest.mark.parametrize("use_c", ENGINES)
def test_semantics_of_failed_cas(use_c: bool) -> None:
    # The cas [0 1] failed although the value was 0: Porcupine's reading (it saw another value) is
    # impossible; Jepsen's (it did not happen) is fine.
    hist = h((0, "invoke", "cas", [0, 1]), (0, "fail", "cas", [0, 1]))
    assert check(hist, "cas-register", init=0, semantics="porcupine", use_c=use_c)["valid"] is False
    assert check(hist, "cas-register", init=0, semantics="jepsen", use_c=use_c)["valid"] is True
    # Knossos: a nil read matches anything; ours: nil means "no value".
    nil_read = h((0, "invoke", "read", None), (0, "ok", "read", None))
    assert check(nil_read, "cas-register", init=0, semantics="knossos", use_c=use_c)["valid"] is True
    assert check(nil_read, "cas-register", init=0, semantics="jepsen", use_c=use_c)["valid"] is False


@pytest.mark.parametrize("use_c", ENGINES)
def test_keys_are_checked_independently(use_c: bool) -> None:
    hist = h(
        (0, "invoke", "write", 1, "a"),
        (1, "invoke", "write", 2, "b"),
        (0, "ok", "write", 1, "a"),
        (1, "ok", "write", 2, "b"),
        (2, "invoke", "read", None, "a"),
        (2, "ok", "read", 2, "a"),
    )
    r = check(hist, "register", init=0, use_c=use_c)
    assert r["valid"] is False and r["partitions"] == 2 and r["failure"]["key"] == "a"
    hist[-1]["value"] = 1
    assert check(hist, "register", init=0, use_c=use_c)["valid"] is True


@pytest.mark.parametrize("use_c", ENGINES)
def test_kv_append_model(use_c: bool) -> None:
    hist = h(
        (0, "invoke", "append", "x", "k"),
        (1, "invoke", "append", "y", "k"),
        (0, "ok", "append", "x", "k"),
        (1, "ok", "append", "y", "k"),
        (2, "invoke", "get", None, "k"),
        (2, "ok", "get", "yx", "k"),
    )
    assert check(hist, "kv", semantics="porcupine", use_c=use_c)["valid"] is True
    hist[-1]["value"] = "xz"
    r = check(hist, "kv", semantics="porcupine", use_c=use_c)
    assert r["valid"] is False and sorted(r["failure"]["final_states"]) == ["xy", "yx"]


def test_generic_models_through_python_stepper() -> None:
    hist = h(
        (0, "invoke", "add", 1),
        (0, "ok", "add", 1),
        (1, "invoke", "add", 2),
        (2, "invoke", "read", None),
        (2, "ok", "read", [1, 2]),
        (1, "ok", "add", 2),
    )
    for use_c in ENGINES:
        assert check(hist, "set", use_c=use_c)["valid"] is True
        bad = [dict(o) for o in hist]
        bad[4]["value"] = [2]
        assert check(bad, "set", use_c=use_c)["valid"] is False
    txn = h(
        (0, "invoke", "txn", [["write", "x", 1], ["write", "y", 2]]),
        (0, "ok", "txn", [["write", "x", 1], ["write", "y", 2]]),
        (1, "invoke", "txn", [["read", "x", None], ["read", "y", None]]),
        (1, "ok", "txn", [["read", "x", 1], ["read", "y", 0]]),
    )
    assert check(txn, "multi-register", init=0, use_c=False)["valid"] is False


def test_time_limit_gives_unknown_never_a_guess() -> None:
    # Many concurrent writes of distinct values and reads that rule out every order:
    # exponential for the search, so a tiny limit must end in "unknown".
    rng = random.Random(7)
    n = 22
    events = [(p, "invoke", "write", p) for p in range(n)]
    events += [(100, "invoke", "read", None), (100, "ok", "read", 999)]
    events += [(p, "ok", "write", p) for p in rng.sample(range(n), n)]
    hist = h(*events)
    for use_c in ENGINES:
        r = check(hist, "register", init=0, time_limit=0.2, use_c=use_c)
        assert r["valid"] == "unknown" and "time limit" in r["error"], r
        assert r["elapsed_s"] < 10  # the limit is honoured (generously: the machine may be loaded)
        r = check(hist, "register", init=0, time_limit=60, max_memory_mb=1, use_c=use_c)
        assert r["valid"] == "unknown" and "memory limit" in r["error"], r


def test_checker_protocol_and_opts_override() -> None:
    hist = h((0, "invoke", "read", None), (0, "ok", "read", 5))
    c = Linearizable(model="register", time_limit=5)
    assert c.check({}, hist, {})["valid"] is False
    assert c.check({}, hist, {"init": 5})["valid"] is True
    with pytest.raises(ValueError, match="unknown model"):
        check(hist, "nope")
    with pytest.raises(ValueError, match="unknown semantics"):
        check(hist, "register", semantics="nope")


def test_nemesis_ops_are_ignored() -> None:
    hist = h(
        ("nemesis", "invoke", "start-partition", None),
        (0, "invoke", "write", 1),
        (0, "ok", "write", 1),
        ("nemesis", "info", "start-partition", None),
        (1, "invoke", "read", None),
        (1, "ok", "read", 1),
    )
    assert check(hist, "register", init=0)["valid"] is True


# ---------------------------------------------------------------- property tests

OP = st.tuples(st.sampled_from(["read", "write", "cas"]), st.integers(0, 3), st.integers(0, 3))
TIMING = st.tuples(st.integers(0, 150), st.integers(0, 150), st.sampled_from(["ok", "ok", "ok", "info"]))


# (invocation time, completion time, completion type, invocation fields, completion fields)
Record = tuple[int, int, str, dict[str, Any], dict[str, Any]]


def execute(ops: list[tuple[str, int, int]], timings: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
    """A real sequential execution of a cas register (initial 0) with random intervals around each
    op's linearization point; processes never overlap themselves. Some writes/cas crash (info)."""
    state = 0
    recs: list[Record] = []
    for i, (f, a, b) in enumerate(ops):
        t = 100 * (i + 1)
        before, after, kind = timings[i % len(timings)] if timings else (0, 0, "ok")
        inv, comp = t - before, t + after + 1  # an op's completion strictly after its invocation
        if f == "read":
            value, typ = state, "ok"
        elif f == "write":
            state, value, typ = a, a, (kind if kind == "info" else "ok")
        else:
            if state == a:
                state, typ = b, (kind if kind == "info" else "ok")
            else:
                typ = "fail"
            value = [a, b]
        recs.append(
            (inv, comp, typ, {"f": f, "value": None if f == "read" else value}, {"f": f, "value": value})
        )
    return with_processes(recs)


def with_processes(recs: list[Record]) -> list[dict[str, Any]]:
    """A history of (invocation time, completion time, completion type, invocation fields, completion
    fields) records: each op gets a process that is free at its invocation; a crashed process is retired."""
    recs.sort(key=lambda r: r[0])
    free_at: dict[int, int] = {}
    events = []
    next_proc = 0
    for inv, comp, typ, inv_fields, comp_fields in recs:
        proc = next((p for p, t in free_at.items() if t < inv), None)
        if proc is None:
            proc, next_proc = next_proc, next_proc + 1
        free_at[proc] = comp
        if typ == "info":
            free_at.pop(proc)
        events.append((inv, 1, {"type": "invoke", "process": proc, **inv_fields}))
        events.append((comp, 0, {"type": typ, "process": proc, **comp_fields}))
    events.sort(key=lambda e: (e[0], e[1]))
    return [{"index": i, "time": t, **op} for i, (t, _, op) in enumerate(events)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OP, min_size=1, max_size=40), st.lists(TIMING, min_size=1, max_size=40))
def test_property_real_executions_are_linearizable(ops: list, timings: list) -> None:
    hist = execute(ops, timings)
    for use_c in ENGINES:
        r = check(hist, "cas-register", init=0, use_c=use_c)
        assert r["valid"] is True, (use_c, r)


def _corrupt(hist: list[dict[str, Any]], which: int) -> list[dict[str, Any]] | None:
    reads = [i for i, op in enumerate(hist) if op["f"] == "read" and op["type"] == "ok"]
    if not reads:
        return None
    bad = [dict(op) for op in hist]
    bad[reads[which % len(reads)]]["value"] = 42  # never written
    return bad


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OP, min_size=1, max_size=40), st.lists(TIMING, min_size=1, max_size=40), st.integers(0, 100))
def test_property_an_impossible_read_is_caught(ops: list, timings: list, which: int) -> None:
    bad = _corrupt(execute(ops, timings), which)
    if bad is None:
        return
    verdicts = {use_c: check(bad, "cas-register", init=0, use_c=use_c)["valid"] for use_c in ENGINES}
    assert set(verdicts.values()) == {False}, verdicts


@settings(max_examples=60, deadline=None)
@given(st.lists(OP, min_size=1, max_size=25), st.lists(TIMING, min_size=1, max_size=25))
def test_property_engines_agree_step_for_step(ops: list, timings: list) -> None:
    if not HAVE_C:
        pytest.skip("the C core is not built")
    hist = execute(ops, timings)
    # Perturb one write to make some histories invalid too.
    for op in hist:
        if op["f"] == "write" and op["type"] == "ok":
            op["value"] = (op["value"] + 1) % 4
            break
    a = check(hist, "cas-register", init=0, use_c=True)
    b = check(hist, "cas-register", init=0, use_c=False)
    assert (a["valid"], a["steps"], a["configs"]) == (b["valid"], b["steps"], b["configs"])
    if a["valid"] is False:
        assert a["failure"] == b["failure"]


def test_shrinking_finds_a_minimal_counterexample() -> None:
    """Hypothesis shrinks a failing generated history down to the essence: one impossible read."""

    def fails(args: tuple[list, list]) -> bool:
        bad = _corrupt(execute(*args), 0)
        return bad is not None and check(bad, "cas-register", init=0)["valid"] is False

    ops, _timings = find(
        st.tuples(st.lists(OP, min_size=1, max_size=30), st.lists(TIMING, min_size=1, max_size=30)),
        fails,
        settings=settings(max_examples=500, database=None),
    )
    assert len(ops) == 1 and ops[0][0] == "read"


KV_OP = st.tuples(
    st.sampled_from(["get", "get", "append", "append", "put"]), st.sampled_from(["a", "b", "c"])
)


def execute_kv(ops: list[tuple[str, str]], timings: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
    """A real sequential execution of one kv key (appends, puts, gets; initial "") with random intervals;
    some appends and puts crash (info)."""
    state = ""
    recs: list[Record] = []
    for i, (f, v) in enumerate(ops):
        t = 100 * (i + 1)
        before, after, kind = timings[i % len(timings)]
        inv, comp = t - before, t + after + 1
        if f == "get":
            recs.append(
                (inv, comp, "ok", {"f": f, "key": "k", "value": None}, {"f": f, "key": "k", "value": state})
            )
            continue
        state = state + v if f == "append" else v
        recs.append((inv, comp, kind, {"f": f, "key": "k", "value": v}, {"f": f, "key": "k", "value": v}))
    return with_processes(recs)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(KV_OP, min_size=1, max_size=20), st.lists(TIMING, min_size=1, max_size=20), st.integers(0, 50)
)
def test_property_kv_real_executions_and_corrupted_gets(ops: list, timings: list, which: int) -> None:
    hist = execute_kv(ops, timings)
    runs = {use_c: check(hist, "kv", semantics="porcupine", init="", use_c=use_c) for use_c in ENGINES}
    assert {r["valid"] for r in runs.values()} == {True}, runs
    gets = [i for i, op in enumerate(hist) if op["f"] == "get" and op["type"] == "ok"]
    if not gets:
        return
    bad = [dict(op) for op in hist]
    bad[gets[which % len(gets)]]["value"] += "z"  # no op ever appends "z"
    runs = {use_c: check(bad, "kv", semantics="porcupine", init="", use_c=use_c) for use_c in ENGINES}
    assert {r["valid"] for r in runs.values()} == {False}, runs
    if HAVE_C:  # the same search, step for step (the kv pruning included)
        assert runs[True]["steps"] == runs[False]["steps"]


def test_the_c_core_is_built_where_a_compiler_is() -> None:
    """The editable install builds the compiled core with gcc; where gcc exists (CI included) it must be
    there and current, or the C engine's tests above would silently not run."""
    import os
    import shutil

    if shutil.which("gcc") is None and os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        pytest.skip("no gcc here: the pure-Python search is the valid fallback")
    assert HAVE_C, "faultline.checkers._wgl is missing or stale: run `pip install -e .` (or `make install`)"
