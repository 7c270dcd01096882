"""Generators on a simulated clock: every combinator's timing, routing and exhaustion."""

from __future__ import annotations

import importlib
import random
from collections import Counter

from faultline import gen as g
from faultline.gen import NS, Context, Pending, simulate


def invokes(history: list[dict]) -> list[dict]:
    return [o for o in history if o["type"] == "invoke"]


def test_dict_is_one_op_and_function_repeats() -> None:
    h = simulate({"f": "read"}, concurrency=2)
    assert [(o["type"], o["f"]) for o in h] == [("invoke", "read"), ("ok", "read")]
    n = 0

    def fn(ctx: Context) -> dict | None:
        nonlocal n
        n += 1
        return {"f": "write", "value": n} if n <= 5 else None

    h = simulate(fn, concurrency=2, latency_s=0.01)
    assert [o["value"] for o in invokes(h)] == [1, 2, 3, 4, 5]


def test_generators_are_values_asking_twice_gives_the_same_answer() -> None:
    gen = g.limit(3, g.repeat({"f": "read"}))
    ctx = Context.initial(2, random.Random(1))
    a1, next1 = gen.op(ctx)  # type: ignore[misc]
    ctx2 = Context.initial(2, random.Random(1))
    a2, _ = gen.op(ctx2)  # type: ignore[misc]
    assert a1 == a2
    assert gen.n == 3 and next1.n == 2  # the original is unchanged


def test_limit_and_concurrency_never_two_outstanding_per_process() -> None:
    h = simulate(g.clients(g.limit(50, g.repeat({"f": "read"}))), concurrency=4, latency_s=0.05)
    assert len(invokes(h)) == 50
    outstanding: dict = {}
    for o in h:
        if o["type"] == "invoke":
            assert o["process"] not in outstanding
            outstanding[o["process"]] = o
        else:
            del outstanding[o["process"]]
    assert {o["process"] for o in invokes(h)} <= {0, 1, 2, 3}
    # four threads, 50 ms each: 50 ops take about 13 rounds, not 50
    assert h[-1]["time"] < 14 * 0.05 * NS


def test_time_limit_and_stagger_rate() -> None:
    gen = g.clients(g.time_limit(10, g.stagger(0.1, g.repeat({"f": "read"}))))
    h = simulate(gen, concurrency=5, latency_s=0.001, seed=3)
    inv = invokes(h)
    assert all(o["time"] < 10 * NS for o in inv)
    assert 70 <= len(inv) <= 130  # about one op per 100 ms for 10 s


def test_delay_is_a_fixed_rate() -> None:
    h = simulate(g.limit(5, g.delay(0.5, g.repeat({"f": "read"}))), concurrency=3)
    assert [o["time"] for o in invokes(h)] == [0, NS // 2, NS, 3 * NS // 2, 2 * NS]


def test_sleep_and_seq() -> None:
    h = simulate(g.seq({"f": "a"}, g.sleep(2), {"f": "b"}), concurrency=1)
    times = {o["f"]: o["time"] for o in invokes(h)}
    assert times == {"a": 0, "b": 2 * NS}


def test_mix_uses_the_seed() -> None:
    gen = g.limit(200, g.mix(g.repeat({"f": "read"}), g.repeat({"f": "write"})))
    a = [o["f"] for o in invokes(simulate(gen, 3, seed=7))]
    b = [o["f"] for o in invokes(simulate(gen, 3, seed=7))]
    c = [o["f"] for o in invokes(simulate(gen, 3, seed=8))]
    assert a == b and a != c
    counts = Counter(a)
    assert 60 < counts["read"] < 140


def test_mix_drops_exhausted_generators() -> None:
    gen = g.mix(g.limit(3, g.repeat({"f": "a"})), g.limit(5, g.repeat({"f": "b"})))
    assert Counter(o["f"] for o in invokes(simulate(gen, 2))) == {"a": 3, "b": 5}


def test_routing_clients_and_nemesis() -> None:
    gen = g.any_of(
        g.clients(g.limit(20, g.repeat({"f": "read"}))),
        g.nemesis(g.seq(g.sleep(0.01), {"f": "start"}, g.sleep(0.01), {"f": "stop"})),
    )
    h = simulate(gen, concurrency=3, latency_s=0.005)
    for o in h:
        if o["f"] in ("start", "stop"):
            assert o["process"] == "nemesis"
        else:
            assert isinstance(o["process"], int)
    assert [o["f"] for o in invokes(h) if o["process"] == "nemesis"] == ["start", "stop"]


def test_clients_only_when_no_nemesis_thread() -> None:
    assert simulate(g.nemesis(g.repeat({"f": "x"})), concurrency=2, nemesis_thread=False) == []


def test_info_retires_the_process() -> None:
    gen = g.clients(g.limit(6, g.repeat({"f": "write"})))
    h = simulate(gen, concurrency=2, latency_s=0.01, complete=lambda o: "info")
    procs = [o["process"] for o in invokes(h)]
    assert len(set(procs)) == 6  # every info gave the thread a fresh process number
    assert all(p % 2 in (0, 1) for p in procs)
    assert max(procs) >= 4


def test_each_thread_runs_its_own_copy() -> None:
    h = simulate(g.clients(g.each_thread({"f": "final-read"})), concurrency=4, latency_s=0.01)
    assert sorted(o["process"] for o in invokes(h)) == [0, 1, 2, 3]


def test_phases_wait_for_outstanding_ops() -> None:
    gen = g.clients(g.phases(g.limit(4, g.repeat({"f": "write"})), g.once({"f": "read"})))
    h = simulate(gen, concurrency=4, latency_s=lambda o: 1.0 if o["f"] == "write" else 0.1)
    read = next(o for o in h if o["f"] == "read")
    last_write_done = max(o["time"] for o in h if o["f"] == "write" and o["type"] == "ok")
    assert read["time"] >= last_write_done


def test_independent_keys_groups_move_to_fresh_keys() -> None:
    gen = g.clients(g.independent(2, lambda k: g.limit(4, g.repeat({"f": "write", "value": 1}))))
    h = simulate(g.limit(40, gen), concurrency=6, latency_s=0.01)
    inv = invokes(h)
    assert len(inv) == 40
    by_key: dict = {}
    for o in inv:
        by_key.setdefault(o["key"], set()).add(o["process"] % 6)
    assert len(by_key) >= 10  # 4 ops per key, so keys kept moving
    # three groups of two threads: each key is worked by one group only
    groups = [{0, 1}, {2, 3}, {4, 5}]
    for threads in by_key.values():
        assert any(threads <= grp for grp in groups)
    # keys are fresh: a key's ops are contiguous in time for its group (never revisited)
    assert all(isinstance(k, str) and k.startswith("k") for k in by_key)


def test_independent_short_tail_joins_last_group() -> None:
    gen = g.clients(g.independent(2, lambda k: g.limit(3, g.repeat({"f": "r"}))))
    h = simulate(g.limit(30, gen), concurrency=3, latency_s=0.01)
    by_key: dict = {}
    for o in invokes(h):
        by_key.setdefault(o["key"], set()).add(o["process"] % 3)
    # one group of three, not a group of two plus a lonely worker on a key of its own
    assert any(len(v) == 3 for v in by_key.values())


def test_cycle_and_flip_flop_for_nemesis_schedules() -> None:
    sched = g.nemesis(g.time_limit(10, g.cycle([g.sleep(1), {"f": "start"}, g.sleep(1), {"f": "stop"}])))
    h = simulate(sched, concurrency=0)
    fs = [(o["f"], o["time"] // NS) for o in invokes(h)]
    assert fs[:4] == [("start", 1), ("stop", 2), ("start", 3), ("stop", 4)]
    assert len(fs) == 9
    ff = g.limit(5, g.flip_flop(g.repeat({"f": "on"}), g.repeat({"f": "off"})))
    assert [o["f"] for o in invokes(simulate(ff, 1))] == ["on", "off", "on", "off", "on"]


def test_time_limit_wakes_a_pending_generator() -> None:
    ctx = Context.initial(1, random.Random(0))
    ans = g.time_limit(5, g.sleep(100)).op(ctx)
    assert ans is not None and isinstance(ans[0], Pending) and ans[0].until == 5 * NS


def test_map_ops_and_lift_list() -> None:
    h = simulate(g.map_ops(lambda o: {**o, "value": 9}, [{"f": "a"}, {"f": "b"}]), 1)
    assert [(o["f"], o["value"]) for o in invokes(h)] == [("a", 9), ("b", 9)]


def test_simulation_is_deterministic_for_a_seed() -> None:
    def build() -> g.Gen:
        return g.any_of(
            g.clients(
                g.time_limit(
                    5,
                    g.independent(
                        2,
                        lambda k: g.limit(
                            10,
                            g.stagger(
                                0.05, g.mix(g.repeat({"f": "read"}), g.repeat({"f": "write", "value": 1}))
                            ),
                        ),
                    ),
                )
            ),
            g.nemesis(g.time_limit(5, g.cycle([g.sleep(1), {"f": "start"}, g.sleep(1), {"f": "stop"}]))),
        )

    a = simulate(build(), 4, seed=11, latency_s=0.02)
    b = simulate(build(), 4, seed=11, latency_s=0.02)
    assert a == b and len(a) > 50


def test_a_sleep_inside_each_thread_ends() -> None:
    """each_thread keeps the deadline a thread's sleep started (it once asked afresh each time: never due)."""
    gen_ = g.clients(g.each_thread(g.seq(g.once({"f": "a"}), g.sleep(1.0), g.once({"f": "b"}))))
    h = simulate(gen_, 2, latency_s=0.01, nemesis_thread=False)
    invoked = [(o["process"], o["f"], o["time"]) for o in h if o["type"] == "invoke"]
    assert sorted(p for p, f, _ in invoked if f == "b") == [0, 1]
    assert all(t >= 1e9 for _, f, t in invoked if f == "b")


def test_updates_that_change_nothing_hand_back_the_same_generator() -> None:
    """A tree of stateless parts is not copied on every event; a stateful part below routing still sees
    the events of its own threads (until_ok counts its attempts from them)."""
    ctx = Context.initial(4, random.Random(0))
    inert = g.any_of(
        g.clients(g.limit(5, g.mix(g.repeat({"f": "r"}), g.repeat({"f": "w"})))), g.nemesis(None)
    )
    inv = {"type": "invoke", "f": "r", "process": 1, "time": 0}
    assert inert.update(ctx, inv) is inert
    mixed = g.any_of(g.clients(g.mix(g.repeat({"f": "r"}), g.repeat({"f": "w"}))))
    ans = mixed.op(ctx)
    assert ans is not None and ans[1] == mixed
    stateful = g.clients(g.until_ok({"f": "read"}))
    after = stateful.update(ctx, inv)
    assert after is not stateful and after.update(ctx, {**inv, "type": "ok"}).op(ctx) is None
    assert ctx.restrict([0, 1]).thread_of(1) == 1 and ctx.with_retired(1).thread_of(5) == 1
    assert ctx.with_retired(1).thread_of(1) is None and ctx.thread_of([1]) is None


def test_the_package_re_exports_its_modules_names() -> None:
    """`faultline.gen` is the one import path: every name it lists is the defining module's own object (no
    submodule shadows a function of the same name, e.g. `simulate`)."""
    import inspect

    for name in g.__all__:
        obj = getattr(g, name)
        assert not inspect.ismodule(obj), name
        module = getattr(obj, "__module__", None)
        if module is not None and module.startswith("faultline.gen."):
            assert getattr(importlib.import_module(module), name) is obj, name
