"""What the generic nemeses share: choosing nodes, asking the DB who leads, and recording what was done.

A generic fault reaches a DB only through the DB protocol's capabilities (db/api.py): the roles its
nodes fall into and its leaders (`Leaders`), its primaries (`Primaries`); it never tests which DB it holds.
Faults of one DB (the store's master replacement, elections, ...) live with that DB (dbs/store/faults/).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self, cast

from faultline.core import Op, Run
from faultline.db.nodes import NodeError
from faultline.gen import Context

log = logging.getLogger("faultline.nemesis")

# a fault that could not be applied or healed: a node did not do what was asked (db/nodes.py)
NemesisError = NodeError

SUBSETS = ("one", "minority", "majority", "all", "leaders")


def nemesis_rng(test: Run, salt: str) -> random.Random:
    """A generator of the run's seed, one per nemesis, so choices replay with the seed."""
    return random.Random(f"{test.spec.seed}:{salt}")


class Seeded:
    """A nemesis whose random choices replay with the run's seed: `setup` gives it a generator of its own,
    named by `salt` (its fault's name), and `rng` refuses to be used before that."""

    salt = ""
    _rng: random.Random | None = None

    def setup(self, test: Run) -> Self:
        self._rng = nemesis_rng(test, self.salt)
        return self

    @property
    def rng(self) -> random.Random:
        if self._rng is None:
            raise NemesisError(f"the {self.salt} nemesis was used before its setup")
        return self._rng


def pick_subset(
    nodes: Sequence[str], subset: str, rng: random.Random, leaders: Sequence[str] = ()
) -> list[str]:
    nodes = sorted(nodes)
    if not nodes:
        return []
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    if subset == "one":
        return shuffled[:1]
    if subset == "minority":
        return sorted(shuffled[: max(1, (len(nodes) - 1) // 2)])
    if subset == "majority":
        return sorted(shuffled[: len(nodes) // 2 + 1])
    if subset == "all":
        return nodes
    if subset == "leaders":
        return sorted(set(leaders) & set(nodes)) or shuffled[:1]
    raise ValueError(f"unknown node subset {subset!r}; valid: {', '.join(SUBSETS)}")


def wait_until(pred: Callable[[], bool], timeout_s: float, interval_s: float = 1.0, what: str = "") -> bool:
    """Polls `pred` until true or the deadline; bounded in time and count."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / max(interval_s, 0.01)) + 2):
        try:
            if pred():
                return True
        except Exception as exc:
            log.info("waiting for %s: %s", what, exc)
        if time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    return False


def bring_back(nodes: set[str], lock: Any, action: Callable[[str], Any], what: str) -> list[str]:
    """Runs `action` (start, resume, ...) on every node still in `nodes`, removing each one that came
    back; a node that failed stays in the set for the next heal. Raises NemesisError naming every failure
    after trying them all."""
    with lock:
        pending = sorted(nodes)
    errors = []
    for n in pending:
        try:
            action(n)
            with lock:
                nodes.discard(n)
        except Exception as exc:
            errors.append(f"{n}: {exc}")
    if errors:
        raise NemesisError(f"could not {what}: {'; '.join(errors)}")
    return pending


def done(op: Op, value: Any = None, kind: str = "ok", **extra: Any) -> Op:
    # `kind` is an op type and `extra` holds op fields (`error`, ...): the completion is an Op
    out = cast(Op, {**op, "type": kind, **extra})
    if value is not None:
        out["value"] = value
    return out


def choice_op(f: str, choices: Mapping[str, Sequence[Any]]) -> Callable[[Context], Op]:
    """An op whose value draws each field from its choices with the run's randomness."""

    def make(ctx: Context) -> Op:
        return {"f": f, "value": {k: ctx.rng.choice(list(v)) for k, v in choices.items()}}

    return make
