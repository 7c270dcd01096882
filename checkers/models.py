"""Sequential specifications (models) for the linearizability checker.

A model is a small class with `init(init_value)` returning a hashable state and
`step(state, f, value, outcome)` returning the next state or `ILLEGAL`. States
must be hashable and compare by value, because the checker interns them and
memoises (linearized set, state) pairs: that is what makes the search fast.

`value` is the op's value as the history records it (a read's is what the
completion returned); `outcome` is "ok", "fail" (completed without effect, the
Porcupine convention) or "info" (unknown: any result is acceptable).
`ANY` as a read value means "the read's result is unknown".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


class _Illegal:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ILLEGAL"


class _Any:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY"


ILLEGAL: Any = _Illegal()
ANY: Any = _Any()


def freeze(v: Any) -> Any:
    """A hashable twin of a JSON-ish value (lists -> tuples, dicts -> sorted item tuples)."""
    if isinstance(v, list | tuple):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted(((k, freeze(x)) for k, x in v.items()), key=repr))
    if isinstance(v, set | frozenset):
        return frozenset(freeze(x) for x in v)
    return v


class Model:
    """Base class: subclasses define `name`, `description`, `init` and `step`."""

    name: ClassVar[str] = "model"
    description: ClassVar[str] = ""
    default_init: ClassVar[Any] = None
    # f names that never change the state: an op of these with an unknown result can be dropped.
    read_only: ClassVar[frozenset[str]] = frozenset()

    def init(self, init_value: Any = None) -> Any:
        return freeze(self.default_init if init_value is None else init_value)

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        raise NotImplementedError

    def is_noop(self, f: str, value: Any, outcome: str) -> bool:
        """True if the op can neither change the state nor be refuted (so the search skips it)."""
        return f in self.read_only and (outcome == "info" or value is ANY)

    def is_observer(self, f: str, value: Any, outcome: str) -> bool:
        """True if the op leaves the state unchanged wherever it is legal.

        The search may then linearize it as soon as it is legal and never try
        alternatives at that point (moving an observer earlier keeps a valid
        linearization valid), which prunes most of the search for reads.
        """
        return outcome == "fail" or f in self.read_only

    def describe_state(self, state: Any) -> Any:
        return state


@dataclass
class Register(Model):
    """A read/write register."""

    name: ClassVar[str] = "register"
    description: ClassVar[str] = "read/write register: read returns the last written value"
    read_only: ClassVar[frozenset[str]] = frozenset({"read"})

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        if f == "read":
            if outcome == "info" or value is ANY or value == state:
                return state
            return ILLEGAL
        if f == "write":
            if outcome == "fail":
                return state
            return value
        return ILLEGAL


@dataclass
class CasRegister(Model):
    """A register with compare-and-set; `value` of a cas is `[expected, new]`."""

    name: ClassVar[str] = "cas-register"
    description: ClassVar[str] = "register with read, write and cas [old new]; a failed cas saw another value"
    read_only: ClassVar[frozenset[str]] = frozenset({"read"})

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        if f == "read":
            if outcome == "info" or value is ANY or value == state:
                return state
            return ILLEGAL
        if f == "write":
            if outcome == "fail":
                return state
            return value
        if f == "cas":
            old, new = value
            if outcome == "ok":
                return new if state == old else ILLEGAL
            if outcome == "fail":  # Porcupine's convention: it ran and found another value
                return state if state != old else ILLEGAL
            return new if state == old else state  # unknown outcome
        return ILLEGAL


@dataclass
class KV(Model):
    """One key of a string store with get/put/append (Porcupine's kv); partition by key."""

    name: ClassVar[str] = "kv"
    description: ClassVar[str] = 'string value per key: get, put, append (initial ""); checked per key'
    default_init: ClassVar[Any] = ""
    read_only: ClassVar[frozenset[str]] = frozenset({"get", "read"})

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        if f in ("get", "read"):
            if outcome == "info" or value is ANY or value == state:
                return state
            return ILLEGAL
        if outcome == "fail":
            return state
        if f in ("put", "write"):
            return value
        if f == "append":
            return state + value
        return ILLEGAL


@dataclass
class SetModel(Model):
    """A grow-only set: add(v), read -> the whole set."""

    name: ClassVar[str] = "set"
    description: ClassVar[str] = "grow-only set: add v; read returns all elements"
    read_only: ClassVar[frozenset[str]] = frozenset({"read"})

    def init(self, init_value: Any = None) -> Any:
        return frozenset(freeze(x) for x in (init_value or ()))

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        if f == "add":
            if outcome == "fail":
                return state
            return state | {freeze(value)}
        if f == "read":
            if outcome == "info" or value is ANY:
                return state
            return state if frozenset(freeze(x) for x in value) == state else ILLEGAL
        return ILLEGAL

    def describe_state(self, state: Any) -> Any:
        return sorted(state, key=repr)


@dataclass
class MultiRegister(Model):
    """Several named registers changed by transactions `[[f, k, v], ...]` of read/write."""

    name: ClassVar[str] = "multi-register"
    description: ClassVar[str] = (
        "named registers; txn value [[read|write, key, value], ...]; missing keys read init"
    )
    read_only: ClassVar[frozenset[str]] = frozenset()
    default_value: Any = None

    def init(self, init_value: Any = None) -> Any:
        if isinstance(init_value, dict):
            return freeze(init_value)
        self.default_value = init_value
        return ()

    def step(self, state: Any, f: str, value: Any, outcome: str) -> Any:
        if outcome == "fail":
            return state
        regs = dict(state)
        for mop in value:
            mf, k, v = mop[0], mop[1], mop[2]
            if mf in ("read", "r"):
                if outcome == "info" or v is None or v is ANY:
                    continue
                if regs.get(k, self.default_value) != v:
                    return ILLEGAL
            elif mf in ("write", "w"):
                regs[k] = freeze(v)
            else:
                return ILLEGAL
        return tuple(sorted(regs.items(), key=repr))

    def is_observer(self, f: str, value: Any, outcome: str) -> bool:
        return outcome == "fail" or all(m[0] in ("read", "r") for m in value)

    def is_noop(self, f: str, value: Any, outcome: str) -> bool:
        return all(m[0] in ("read", "r") for m in value) and (
            outcome == "info" or all(m[2] is None or m[2] is ANY for m in value)
        )

    def describe_state(self, state: Any) -> Any:
        return {str(k): v for k, v in state}


MODELS: dict[str, type[Model]] = {m.name: m for m in (Register, CasRegister, KV, SetModel, MultiRegister)}


def get_model(name: str | Model) -> Model:
    """A fresh model instance by name (or the instance itself)."""
    if isinstance(name, Model):
        return name
    try:
        return MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(sorted(MODELS))}") from None
