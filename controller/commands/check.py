"""`faultline check HISTORY...`: check history files for linearizability (or another property)."""

from __future__ import annotations

import argparse

HELP = "check history files for linearizability (or set/bank/counter/... with --checker)"
DESCRIPTION = (
    "Checks each HISTORY file and prints one JSON object per line per file: file, valid, model, ops, "
    "elapsed_s (the check itself, without parsing) and the evidence. Formats: our history.jsonl, Jepsen EDN, "
    "Porcupine's etcd logs and kv files, elle-cli JSON; --format auto guesses by content, and each format "
    "implies its semantics and model unless given. Exit code: 0 all valid, 1 any invalid, 2 any unknown "
    "(e.g. the time limit ran out) and none invalid, 254 bad arguments or a malformed/missing file."
)

SEMANTICS_HELP = (
    "what fail/info mean: jepsen (ours: fail did not happen, info may have), knossos (as jepsen, and a nil "
    "read matches anything), porcupine (fail completed without effect, e.g. a cas that saw another value); "
    "default: what the format implies"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from faultline.checkers.history import FORMATS
    from faultline.checkers.models import MODELS
    from faultline.checkers.registry import CHECKERS

    p.add_argument("histories", nargs="+", metavar="HISTORY", help="history files to check")
    p.add_argument("--model", choices=sorted(MODELS), help="the sequential model (default: what the format implies, "
                   "else cas-register)")
    p.add_argument("--format", default="auto", choices=["auto", *FORMATS], help="input format (default auto)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="give up after S seconds per file with valid 'unknown' (default: no limit)")
    p.add_argument("--max-memory", type=float, default=2048, metavar="MB",
                   help="give up with 'unknown' when the search's memo outgrows MB (default 2048)")
    p.add_argument("--semantics", choices=["jepsen", "knossos", "porcupine"], help=SEMANTICS_HELP)
    p.add_argument("--init", default=None, metavar="JSON", help="the model's initial value as JSON (e.g. 0, null, '\"\"')")
    p.add_argument("--checker", default="linearizable", choices=list(CHECKERS), metavar="NAME",
                   help="which checker to run (default linearizable): "
                        + "; ".join(f"{e.name} ({e.help})" for e in CHECKERS.values()))
    p.add_argument("--html", metavar="DIR", default=None,
                   help="write a counterexample page DIR/<file>.html for each invalid history")
    p.add_argument("--engine", choices=["auto", "c", "python"], default="auto",
                   help="linearizability search: the C core if built (auto), or force one")
    p.add_argument("--consistency-models", default=None, metavar="M[,M...]",
                   help="transactional histories (elle-*): the models the system claims (default "
                        "strict-serializable, or a Jepsen store's test.edn)")
    p.add_argument("--cycle-search-timeout", type=float, default=1.0, metavar="S",
                   help="transactional histories: seconds to search each strongly connected component "
                        "for cycles of each kind (default 1); past it that search is 'unknown'")


def _check_one(path: str, args: argparse.Namespace, init: object) -> dict:
    import os
    import time

    from faultline.checkers import history as hist
    from faultline.checkers.elle import files as elle

    # Transactional (Elle-style) histories: chosen with --checker elle-*, a Jepsen store directory, or
    # detected when no --model asks for linearizability.
    models = args.consistency_models.split(",") if args.consistency_models else None
    if args.checker.startswith("elle-") or os.path.isdir(path):
        return elle.check_source(path, elle.load(path, args.format), args.checker, models,
                                 args.cycle_search_timeout, args.html)
    loaded = hist.load(path, args.format)
    if args.checker == "linearizable" and args.model is None and elle.detect_kind(loaded.ops):
        return elle.check_source(path, elle.from_loaded(loaded), None, models, args.cycle_search_timeout, args.html)
    if args.checker == "linearizable":
        from faultline.checkers import linearizability

        model = args.model or loaded.model or "cas-register"
        semantics = args.semantics or loaded.semantics
        init_value = init if args.init is not None else (loaded.init if model == loaded.model else None)
        use_c = {"auto": None, "c": True, "python": False}[args.engine]
        res = linearizability.check(loaded.ops, model=model, time_limit=args.time_limit, semantics=semantics,
                                    init=init_value, use_c=use_c, max_memory_mb=args.max_memory)
        out = {"file": path, "valid": res["valid"], "model": model, "format": loaded.format, "ops": res["ops"],
               "elapsed_s": res["elapsed_s"]}
        out["evidence"] = {k: v for k, v in res.items() if k not in ("valid", "model", "ops", "elapsed_s")}
    else:
        from faultline.checkers import registry

        checker = registry.get(args.checker)
        start = time.monotonic()
        res = checker.check({}, loaded.ops, {})
        elapsed = time.monotonic() - start
        out = {"file": path, "valid": res.get("valid", "unknown"), "model": args.checker, "format": loaded.format,
               "ops": len(loaded.ops), "elapsed_s": round(elapsed, 6),
               "evidence": {k: v for k, v in res.items() if k != "valid"}}
    if loaded.warnings:
        out["warnings"] = loaded.warnings
    if args.html and out["valid"] is False:
        from pathlib import Path

        from faultline.checkers.counterexample import render_html

        dest = Path(args.html) / (Path(path).name + ".html")
        render_html(res, loaded.ops, dest)
        out["counterexample"] = str(dest)
    return out


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    import warnings

    from faultline.checkers.api import merge_valid
    from faultline.checkers.history import HistoryFormatError
    from faultline.controller.errors import EXIT_BAD_INPUT, UsageError, exit_code_for

    init = None
    if args.init is not None:
        try:
            init = json.loads(args.init)
        except ValueError:
            raise UsageError(f"--init {args.init!r} is not valid JSON") from None
    if args.time_limit is not None and args.time_limit <= 0:
        raise UsageError("--time-limit must be positive")
    if args.cycle_search_timeout <= 0:
        raise UsageError("--cycle-search-timeout must be positive")
    if args.consistency_models:
        from faultline.checkers.elle.consistency import canonical

        try:
            canonical(args.consistency_models.split(","))
        except ValueError as exc:
            raise UsageError(f"--consistency-models: {exc}") from None
    if args.engine == "c":
        from faultline.checkers import linearizability

        if linearizability._wgl is None:
            raise UsageError("--engine c: the compiled core is not built (pip install -e . with a C compiler)")
    verdicts = []
    bad_input = False
    show_progress = len(args.histories) > 1 and sys.stderr.isatty()
    for i, path in enumerate(args.histories, 1):
        if show_progress:
            print(f"[{i}/{len(args.histories)}] {path}", file=sys.stderr, flush=True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # surfaced in the JSON as "warnings" instead
                out = _check_one(path, args, init)
        except HistoryFormatError as exc:
            print(f"faultline check: error: {exc}", file=sys.stderr)
            bad_input = True
            continue
        except (ValueError, TypeError, KeyError) as exc:
            # A well-formed file whose ops do not fit the model (e.g. a cas without [old new]).
            print(f"faultline check: error: {path}: does not fit the model: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            bad_input = True
            continue
        print(json.dumps(out, default=str), flush=True)
        verdicts.append(out["valid"])
    if bad_input:
        return EXIT_BAD_INPUT
    return exit_code_for(merge_valid(verdicts))
