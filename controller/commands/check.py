"""`faultline check HISTORY...`: check history files for linearizability (or another property)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from faultline.core import options

if TYPE_CHECKING:
    from faultline.checkers.inference import Choice
    from faultline.history import LoadedHistory
    from faultline.history.files import Source

HELP = "check history files for linearizability (or set/bank/counter/... with --checker)"
DESCRIPTION = (
    "Checks each HISTORY file and prints one JSON object per line per file: file, valid, model, ops, "
    "elapsed_s (the check itself, without parsing) and the evidence. Formats: our history.jsonl, Jepsen EDN, "
    "Porcupine's etcd logs and kv files, elle-cli JSON; --format auto guesses by content, and each format "
    "implies its semantics. The checker and model are inferred from the history (its fs, its values, the "
    "test.json beside it) unless given. Exit code: 0 all valid, 1 any invalid, 2 any unknown "
    "(e.g. the time limit ran out) and none invalid, 254 bad arguments, a malformed/missing file, or a "
    "history no checker can judge (an op its model does not know, a completion without an invocation "
    "outside a transactional history of completions alone, a checker that cannot be inferred)."
)

SEMANTICS_HELP = (
    "what fail/info mean: jepsen (ours: fail did not happen, info may have), knossos (as jepsen, and a nil "
    "read matches anything), porcupine (fail completed without effect, e.g. a cas that saw another value); "
    "default: what the format implies"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    _add_input_arguments(p)
    _add_checker_arguments(p)


def _add_input_arguments(p: argparse.ArgumentParser) -> None:
    """The histories, how to read them, and the limits of a linearizability search."""
    from faultline.checkers.models import MODELS
    from faultline.history import FORMATS

    p.add_argument("histories", nargs="+", metavar="HISTORY", help="history files to check")
    p.add_argument(
        "--model",
        choices=sorted(MODELS),
        help="the sequential model for linearizability (default: inferred from the history, see --checker)",
    )
    p.add_argument("--format", default="auto", choices=["auto", *FORMATS], help="input format (default auto)")
    p.add_argument(
        "--time-limit",
        type=options.positive_float,
        default=None,
        metavar="S",
        help="give up after S seconds per file with valid 'unknown' (default: no limit)",
    )
    p.add_argument(
        "--max-memory",
        type=options.positive_float,
        default=2048,
        metavar="MB",
        help="give up with 'unknown' when the search's memo outgrows MB (default 2048)",
    )
    p.add_argument("--semantics", choices=["jepsen", "knossos", "porcupine"], help=SEMANTICS_HELP)
    p.add_argument(
        "--init",
        default=None,
        metavar="JSON",
        help="the model's initial value as JSON (e.g. 0, null, '\"\"')",
    )


def _add_checker_arguments(p: argparse.ArgumentParser) -> None:
    """Which checker, the options of particular checkers, and the counterexample pages."""
    from faultline.checkers.registry import CHECKERS

    p.add_argument(
        "--checker",
        default=None,
        choices=list(CHECKERS),
        metavar="NAME",
        help="which checker to run (default: inferred from the history's fs and values and the "
        "test.json beside it; refused with 254 when it cannot be inferred): "
        + "; ".join(f"{e.name} ({e.help})" for e in CHECKERS.values()),
    )
    p.add_argument(
        "--html",
        metavar="DIR",
        default=None,
        help="write a counterexample page DIR/<file>.html for each invalid history (DIR is "
        "created; an existing file there is refused, never overwritten by a directory)",
    )
    p.add_argument(
        "--engine",
        choices=["auto", "c", "python"],
        default="auto",
        help="linearizability search: the C core if built (auto), or force one",
    )
    p.add_argument(
        "--consistency-models",
        default=None,
        metavar="M[,M...]",
        help="transactional histories (elle-*): the models the system claims (default "
        "strict-serializable, or a Jepsen store's test.edn)",
    )
    p.add_argument(
        "--stability-window",
        type=options.non_negative_float,
        default=None,
        metavar="SECONDS",
        help="set checker: call an element lost only once a read that began SECONDS after it was "
        "last seen missed it too; a loss no read confirms that late is 'unknown' (default: "
        "off, Jepsen's rule; histories without times ignore it; other checkers ignore it)",
    )
    p.add_argument(
        "--cycle-search-timeout",
        type=options.positive_float,
        default=1.0,
        metavar="S",
        help="transactional histories: seconds to search each strongly connected component "
        "for cycles of each kind (default 1); past it that search is 'unknown'",
    )


# The ops of the history checked last, kept until the process ends: freeing them one object at a time (a
# quarter of a second for 200,000 list-append ops) is work a process about to exit need not do. The list
# holds itself, a cycle that the first read's gc.freeze() (history.frozen_reads) puts out of reach of the
# collections at exit; each new history replaces the last one, so a run over many files keeps one.
_LAST: list[Any] = []
_LAST.append(_LAST)


def _keep_until_exit(ops: object) -> None:
    del _LAST[1:]
    _LAST.append(ops)


def _choose(path: str, loaded: LoadedHistory, args: argparse.Namespace) -> Choice:
    """The checker and model for one history: the flags, else what checkers.inference infers."""
    from faultline.checkers import inference
    from faultline.history import files

    if args.model:
        return inference.Choice("linearizable", args.model, "--model")
    if args.checker and args.checker != "linearizable":
        return inference.Choice(args.checker, None, "--checker")
    choice = inference.infer(loaded.ops, files.test_map(path), loaded.model)
    if args.checker == "linearizable" and choice.checker != "linearizable":
        raise inference.CannotInfer(
            f"--checker linearizable needs --model: the history looks like {choice.checker} ({choice.reason})"
        )
    return choice


def _check_one(path: str, args: argparse.Namespace, init: object) -> dict:
    import os

    from faultline import history as hist
    from faultline.checkers import inference
    from faultline.checkers.elle.txns import detect_kind
    from faultline.checkers.ops import BadOp
    from faultline.history import files

    # Transactional (Elle-style) histories: chosen with --checker elle-*, a Jepsen store directory, or
    # inferred from the history.
    models = args.consistency_models.split(",") if args.consistency_models else None
    if (args.checker or "").startswith("elle-") or os.path.isdir(path):
        with hist.frozen_reads():
            src = files.load(path, args.format, strict=False)
        _keep_until_exit(src.ops)
        if not _completions_alone(src.ops):
            hist.check_pairs(src.ops, src.lines, src.path or path)
        return _run_elle(path, src, args.checker, models, args.cycle_search_timeout, args.html)
    with hist.frozen_reads():
        loaded = hist.load(path, args.format, strict=False)
    _keep_until_exit(loaded.ops)
    unpaired = _completions_alone(loaded.ops) and not args.model and detect_kind(loaded.ops) is not None
    if not unpaired:
        hist.check_pairs(loaded.ops, loaded.lines, path)
    try:
        choice = _choose(path, loaded, args)
    except inference.CannotInfer as exc:
        raise hist.HistoryFormatError(path, None, str(exc)) from None
    if unpaired and not choice.checker.startswith("elle-"):
        hist.check_pairs(loaded.ops, loaded.lines, path)  # only Elle's checkers take completions alone
    if choice.checker.startswith("elle-"):
        return _run_elle(
            path, files.from_loaded(loaded), choice.checker, models, args.cycle_search_timeout, args.html
        )
    try:
        inference.check_fs(loaded.ops, choice)
        out, res = _run_checker(path, loaded, choice, args, init)
    except BadOp as exc:
        line = loaded.lines[exc.position] if exc.position < len(loaded.lines) else None
        raise hist.HistoryFormatError(path, line, str(exc)) from None
    if choice.reason not in ("--model", "--checker"):
        out["inferred"] = choice.reason
    if loaded.independent:
        out["independent"] = True
    if loaded.warnings:
        out["warnings"] = loaded.warnings
    if args.html and out["valid"] is False:
        from pathlib import Path

        from faultline.pages.counterexample import render_html

        dest = Path(args.html) / (Path(path).name + ".html")
        render_html(res, loaded.ops, dest)
        out["counterexample"] = str(dest)
    return out


def _completions_alone(ops: Sequence[Mapping[str, Any]]) -> bool:
    """A history of client completions with no invocation at all, as Elle's README and its own tests write
    transactional histories. Only the Elle checkers take one (each completion stands for a transaction
    whose invocation is unknown: no realtime order leads into it); anything else pairs every completion
    with its invocation (history.check_pairs)."""
    client = False
    for op in ops:
        if op.get("process") == "nemesis":
            continue
        if op.get("type") == "invoke":
            return False
        client = True
    return client


ELLE_KINDS = {"elle-list-append": "list-append", "elle-rw-register": "rw-register"}


def _run_elle(
    path: str,
    src: Source,
    checker: str | None = None,
    consistency_models: list[str] | None = None,
    cycle_search_timeout: float = 1.0,
    html_dir: str | None = None,
) -> dict:
    """The JSON line for one transactional history: verdict, anomalies by kind (cycles without drawings),
    and with `html_dir` a page with each cycle drawn. Raises ValueError for a history it cannot check."""
    from pathlib import Path

    from faultline.checkers.elle import checker as elle
    from faultline.checkers.elle.txns import detect_kind

    kind = ELLE_KINDS.get(checker or "") or detect_kind(src.ops)
    if kind is None:
        raise ValueError("no Elle-style transactions (f txn, micro-ops [append|r|w k v]) in the history")
    models = consistency_models or src.consistency_models
    res = elle.check(src.ops, kind, models, cycle_search_timeout)
    evidence = {k: v for k, v in res.items() if k not in ("valid", "elapsed_s")}
    evidence["anomalies"] = {
        name: [{k: v for k, v in case.items() if k != "svg"} for case in cases]
        for name, cases in res["anomalies"].items()
    }
    out: dict = {
        "file": path,
        "valid": res["valid"],
        "model": res["checker"],
        "format": src.format,
        "ops": len(src.ops),
        "elapsed_s": res["elapsed_s"],
        "evidence": evidence,
    }
    if src.warnings:
        out["warnings"] = src.warnings
    if html_dir and res["valid"] is not True:
        from faultline.pages.elle import write

        name = Path(path).name or "history"
        out["counterexample"] = str(write(res, Path(html_dir) / f"{name}.html", f"{res['checker']}: {path}"))
    return out


def _run_checker(
    path: str, loaded: LoadedHistory, choice: Choice, args: argparse.Namespace, init: object
) -> tuple[dict, dict]:
    """The JSON line for one history and the checker's own result."""
    import time

    ops = loaded.ops
    if choice.checker == "linearizable":
        from faultline.checkers import linearizability

        model = choice.model
        assert model is not None  # a linearizable choice always names its model (inference.Choice)
        semantics = args.semantics or loaded.semantics
        init_value = init if args.init is not None else (loaded.init if model == loaded.model else None)
        use_c = {"auto": None, "c": True, "python": False}[args.engine]
        res = linearizability.check(
            ops,
            model=model,
            time_limit=args.time_limit,
            semantics=semantics,
            init=init_value,
            use_c=use_c,
            max_memory_mb=args.max_memory,
        )
        out = {
            "file": path,
            "valid": res["valid"],
            "model": model,
            "format": loaded.format,
            "ops": res["ops"],
            "elapsed_s": res["elapsed_s"],
        }
        out["evidence"] = {k: v for k, v in res.items() if k not in ("valid", "model", "ops", "elapsed_s")}
        return out, res
    from faultline.checkers import registry

    kwargs = {"stability_window_s": args.stability_window} if choice.checker == "set" else {}
    checker = registry.get(choice.checker, **kwargs)
    if any("key" in op for op in ops if op.get("process") != "nemesis"):
        from faultline.checkers.api import PerKey

        checker = PerKey(checker)  # each key's ops are a history of their own
    start = time.monotonic()
    res = checker.check({}, ops, {})
    elapsed = time.monotonic() - start
    out = {
        "file": path,
        "valid": res.get("valid", "unknown"),
        "model": choice.checker,
        "format": loaded.format,
        "ops": len(ops),
        "elapsed_s": round(elapsed, 6),
        "evidence": {k: v for k, v in res.items() if k != "valid"},
    }
    return out, res


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from faultline.checkers.api import merge_valid
    from faultline.controller.errors import EXIT_BAD_INPUT, exit_code_for

    init = _parsed_init(args)
    _refuse_bad_options(args)
    verdicts = []
    bad_input = False
    show_progress = len(args.histories) > 1 and sys.stderr.isatty()
    for i, path in enumerate(args.histories, 1):
        if show_progress:
            print(f"[{i}/{len(args.histories)}] {path}", file=sys.stderr, flush=True)
        out = _check_or_report(path, args, init)
        if out is None:
            bad_input = True
            continue
        print(json.dumps(out, default=str), flush=True)
        verdicts.append(out["valid"])
    if bad_input:
        return EXIT_BAD_INPUT
    return exit_code_for(merge_valid(verdicts))


def _parsed_init(args: argparse.Namespace) -> object:
    """--init as a value (None when not given)."""
    import json

    from faultline.controller.errors import UsageError

    if args.init is None:
        return None
    try:
        return json.loads(args.init)
    except ValueError:
        raise UsageError(f"--init {args.init!r} is not valid JSON") from None


def _refuse_bad_options(args: argparse.Namespace) -> None:
    """Raises UsageError for options no history can make right."""
    from faultline.controller.errors import UsageError

    if args.consistency_models:
        from faultline.checkers.elle.consistency import canonical

        try:
            canonical(args.consistency_models.split(","))
        except ValueError as exc:
            raise UsageError(f"--consistency-models: {exc}") from None
    if args.html is not None:
        from pathlib import Path

        if Path(args.html).exists() and not Path(args.html).is_dir():
            raise UsageError(
                f"--html {args.html}: exists and is not a directory (--html names a directory "
                "for the counterexample pages)"
            )
    if args.engine == "c":
        from faultline.checkers import linearizability

        if linearizability._wgl is None:
            raise UsageError(
                "--engine c: the compiled core is not built (pip install -e . with a C compiler)"
            )


def _check_or_report(path: str, args: argparse.Namespace, init: object) -> dict | None:
    """One history's JSON line, or None after saying on stderr why it could not be checked."""
    import sys
    import warnings

    from faultline.history import HistoryFormatError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # surfaced in the JSON as "warnings" instead
            return _check_one(path, args, init)
    except HistoryFormatError as exc:
        print(f"faultline check: error: {exc}", file=sys.stderr)
    except OSError as exc:  # e.g. --html DIR cannot be created, a store directory unreadable
        print(
            f"faultline check: error: {path}: {exc.strerror or exc}"
            + (f" ({exc.filename})" if exc.filename else ""),
            file=sys.stderr,
        )
    except (ValueError, TypeError, KeyError) as exc:
        # A well-formed file whose ops do not fit the model (e.g. a cas without [old new]).
        print(
            f"faultline check: error: {path}: does not fit the model: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
    return None
