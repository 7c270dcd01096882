"""The web view of a store: runs newest first, filters, run pages, files, zip downloads.

Standard library only (http.server). Safety rules: it binds loopback unless told otherwise, every value
that reaches a page is HTML-escaped, run ids must match the store's naming (`<test-name>/<stamp>`), and a
file path is served only if, resolved (symlinks included), it is still inside that run's directory.
Files from run directories are served with a sandboxing Content-Security-Policy, so a page in a run
cannot act as the web view.
"""

from __future__ import annotations

import html
import io
import ipaddress
import json
import mimetypes
import os
import queue
import selectors
import shutil
import socket
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, quote, unquote, urlsplit

from faultline.pages.layout import head
from faultline.results.publish import publish
from faultline.results.scorecard import MET_STYLE, campaign_expectations, render_html
from faultline.results.store import STAMP_RE, RunDir, RunInfo, Store, StoreError, find_stores, valid_name

PAGE_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'none'"
FILE_CSP = "sandbox allow-scripts allow-popups; frame-ancestors 'self'"
TEXT_TYPES = {
    ".jsonl": "text/plain",
    ".log": "text/plain",
    ".edn": "text/plain",
    ".txt": "text/plain",
    ".json": "application/json",
}
MAX_LISTED_FILES = 2000
VERDICT_CLASSES = ("valid", "invalid", "unknown", "unchecked", "damaged")
CONNECTION_TIMEOUT_S = 10.0  # a client that sends nothing for this long is dropped
WORKERS = 8  # requests served at once; idle connections wait in one selector, not in threads
MAX_WAITING = 256  # connections waiting for their request; beyond it the oldest is dropped


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _run_href(run_id: str) -> str:
    return "/run/" + quote(run_id) + "/"


def _file_href(run_id: str, rel: str) -> str:
    return "/files/" + quote(run_id) + "/" + quote(rel)


def _scorecard_href(store: str) -> str:
    return "/scorecard?store=" + quote(store or ".")


def _nav() -> str:
    return (
        "<nav><a href='/'>runs</a><a href='/campaigns'>campaigns</a><a href='/scorecard'>scorecard</a></nav>"
    )


def _page(title: str, body: str) -> bytes:
    return f"{head(title)}{_nav()}{body}</body></html>\n".encode()


@dataclass(frozen=True)
class Listed:
    """A run as the web view lists it: its index line and the store (relative to the served root) it is in."""

    info: RunInfo
    store: str  # "" for the served root itself

    @property
    def run_id(self) -> str:
        return f"{self.store}/{self.info.run_id}" if self.store else self.info.run_id


@dataclass(frozen=True)
class CampaignStore:
    """A store inside the served root that holds a campaign's progress or a scorecard."""

    store: str
    runs: int
    expectations: dict[str, Any] | None
    scored: bool

    @property
    def label(self) -> str:
        return self.store or "(this store)"


class StoreView:
    """Renders pages for the stores at or below one directory; the HTTP handler only routes."""

    def __init__(self, root: Path | str) -> None:
        self.store = Store(root, create=False)
        self.root = self.store.root.resolve()
        self._publishing = threading.Lock()

    # ----------------------------------------------------------------------------- discovery
    def stores(self) -> dict[str, Store]:
        """Every store at any depth below the root, by path relative to it ("" for the root)."""
        out = {}
        for path in find_stores(self.store.root):
            rel = path.relative_to(self.store.root).as_posix()
            out["" if rel == "." else rel] = Store(path, create=False)
        return out

    def runs(self) -> list[Listed]:
        out = []
        for rel, store in self.stores().items():
            out += [Listed(info, rel) for info in store.runs()]
        out.sort(key=lambda r: (r.info.stamp, r.run_id), reverse=True)
        return out

    def campaigns(self) -> list[CampaignStore]:
        out = []
        for rel, store in self.stores().items():
            expectations = campaign_expectations(store.root)
            scored = (store.root / "_score" / "scorecard.json").is_file()
            if expectations is not None or scored:
                out.append(CampaignStore(rel, sum(1 for _ in store.run_dirs()), expectations, scored))
        return out

    # ----------------------------------------------------------------------------- the run list
    def index(self, query: dict[str, list[str]]) -> bytes:
        runs = self.runs()
        want = {k: (query.get(k) or [""])[0] for k in ("store", "workload", "nemesis", "verdict")}

        def keep(r: Listed) -> bool:
            i = r.info
            return (
                (not want["store"] or r.store == want["store"].strip("/").removeprefix("."))
                and (not want["workload"] or i.workload == want["workload"])
                and (
                    not want["nemesis"]
                    or want["nemesis"] in (i.nemesis or ["none"])
                    or want["nemesis"] == i.nemesis_label
                )
                and (not want["verdict"] or i.verdict_label == want["verdict"])
            )

        stores = sorted({r.store for r in runs})
        options = {
            "store": [s or "." for s in stores] if len(stores) > 1 else [],
            "workload": sorted({r.info.workload for r in runs if r.info.workload}),
            "nemesis": sorted({n for r in runs for n in (r.info.nemesis or ["none"])}),
            "verdict": list(VERDICT_CLASSES),
        }
        shown = [r for r in runs if keep(r)]
        parts = [f"<h1>Runs in {_e(self.store.root.name)}</h1>"]
        if not runs:
            parts.append(
                f"<p id='empty'>No runs in <code>{_e(self.store.root)}</code>, at any depth. A run is a "
                "directory <code>STORE/&lt;test-name&gt;/&lt;stamp&gt;/</code>, as <code>faultline run "
                "--store STORE</code> and <code>faultline campaign</code> write them.</p>"
            )
            return _page(f"runs - {self.store.root.name}", "".join(parts))
        parts.append("<form method='get' action='/' id='filters'>")
        for name, values in options.items():
            if not values:
                continue
            parts.append(f"<label>{name} <select name='{name}' id='f-{name}'><option value=''>all</option>")
            for v in values:
                sel = " selected" if v == want[name] else ""
                parts.append(f"<option value='{_e(v)}'{sel}>{_e(v)}</option>")
            parts.append("</select></label>")
        parts.append("<button type='submit'>filter</button></form>")
        parts.append(
            f"<p id='count'>{len(shown)} of {len(runs)} runs"
            + (f" in {len(stores)} stores" if len(stores) > 1 else "")
            + "</p>"
        )
        store_col = "<th>store</th>" if len(stores) > 1 else ""
        parts.append(
            f"<table id='runs'><tr><th>started</th>{store_col}<th>test</th><th>workload</th><th>nemesis</th>"
            "<th>bugs</th><th>seed</th><th>verdict</th><th>duration (s)</th><th>ops</th></tr>"
        )
        for r in shown:
            i = r.info
            dur = "" if i.duration_s is None else f"{i.duration_s:.1f}"
            store_cell = f"<td>{_e(r.store or '.')}</td>" if len(stores) > 1 else ""
            test = _e(i.test_name) + (f" <small>({_e(i.problem)})</small>" if i.problem else "")
            parts.append(
                f"<tr class='{_e(i.verdict_label)}'><td><a class='run' href='{_e(_run_href(r.run_id))}'>{_e(i.stamp)}</a>"
                f"</td>{store_cell}<td>{test}</td><td>{_e(i.workload)}</td><td>{_e(i.nemesis_label)}</td>"
                f"<td>{_e(i.bug_label)}</td><td>{_e(i.seed)}</td><td class='verdict'>{_e(i.verdict_label)}</td>"
                f"<td>{dur}</td><td>{_e(i.ops)}</td></tr>"
            )
        parts.append("</table>")
        return _page(f"runs - {self.store.root.name}", "".join(parts))

    # ----------------------------------------------------------------------------- campaigns and scorecards
    def campaigns_page(self) -> bytes:
        camps = self.campaigns()
        parts = ["<h1>Campaigns</h1>"]
        if not camps:
            parts.append(
                "<p id='empty'>No campaign here: <code>faultline campaign FILE.toml</code> writes one, "
                "<code>faultline score STORE</code> a scorecard.</p>"
            )
            return _page("campaigns", "".join(parts))
        parts.append(
            "<table id='campaigns'><tr><th>store</th><th>campaign</th><th>runs</th>"
            "<th>expectations</th><th>scorecard</th></tr>"
        )
        for c in camps:
            exp = c.expectations
            met = "–" if exp is None else f"{exp['met']}/{exp['total']} met"
            cls = "" if exp is None else f" style='{MET_STYLE[exp['met'] == exp['total']]}'"
            card = (
                f"<a class='scorecard' href='{_e(_scorecard_href(c.store))}'>scorecard</a>"
                if c.scored
                else "not scored yet"
            )
            parts.append(
                f"<tr><td><a class='store' href='/?store={_e(quote(c.store or '.'))}'>{_e(c.label)}</a></td>"
                f"<td>{_e((exp or {}).get('campaign') or '–')}</td><td class='n'>{c.runs}</td>"
                f"<td{cls}>{_e(met)}</td><td>{card}</td></tr>"
            )
        parts.append("</table>")
        return _page("campaigns", "".join(parts))

    def scorecard(self, store: str | None) -> bytes | Path:
        """The scorecard of `store` (relative to the root) rendered with this view's links, or the path of
        a scorecard.html that has no scorecard.json beside it; with no `store`, the only one there is."""
        scored = {c.store: c for c in self.campaigns() if c.scored}
        if store is None:
            if len(scored) != 1:
                plain = self.store.root / "_score" / "scorecard.html"
                if not scored and plain.is_file():
                    return plain
                return self._no_scorecard(len(scored))
            store = next(iter(scored))
        store = "" if store in (".", "/") else store.strip("/")
        if store not in scored:
            raise StoreError(f"no scorecard for store {store or '.'}")
        base = self.store.root / store if store else self.store.root
        card = json.loads((base / "_score" / "scorecard.json").read_text(encoding="utf-8"))
        link = "/run/" + (quote(store) + "/" if store else "") + "{run_id}/"
        html_text = render_html(card, link, nav=_nav(), expectations=scored[store].expectations)
        return html_text.encode()

    def _no_scorecard(self, n: int) -> bytes:
        if n == 0:
            return _page(
                "scorecard",
                "<h1>No scorecard yet</h1><p id='empty'>Run <code>faultline score STORE</code> "
                "(or <code>faultline campaign FILE.toml</code>) first.</p>",
            )
        return _page(
            "scorecards",
            f"<h1>{n} scorecards</h1><p>Pick one on the <a href='/campaigns'>campaigns</a> page.</p>",
        )

    # ----------------------------------------------------------------------------- one run
    def run_page(self, run: RunDir, full_id: str) -> bytes:
        info = run.info()
        store = full_id.rsplit("/", 2)[0] if full_id.count("/") >= 2 else ""
        crumbs = [
            f"<a href='/?store={_e(quote(store or '.'))}'>{_e(store or self.store.root.name)}</a>",
            _e(info.test_name),
            _e(info.stamp),
        ]
        if (run.path.parent.parent / "_score" / "scorecard.json").is_file():
            crumbs.append(f"<a class='scorecard' href='{_e(_scorecard_href(store))}'>its scorecard</a>")
        parts = [f"<p id='crumbs'>{' › '.join(crumbs)}</p><h1>{_e(info.test_name)}</h1><table id='summary'>"]
        for k, v in (
            ("run", info.run_id),
            ("workload", info.workload),
            ("nemesis", info.nemesis_label),
            ("bugs", info.bug_label),
            ("seed", info.seed),
            ("started", info.start_time),
            ("duration (s)", info.duration_s),
            ("ops", info.ops),
            ("status", info.status),
            ("problem", info.problem),
        ):
            if v is not None or k != "problem":
                parts.append(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>")
        parts.append(
            f"<tr class='{_e(info.verdict_label)}'><th>verdict</th>"
            f"<td class='verdict'>{_e(info.verdict_label)}</td></tr></table><p>"
        )
        if info.status != "damaged" or run.report_path.exists():
            parts.append(f"<a id='report' href='{_e(_file_href(full_id, 'report.html'))}'>report</a> &nbsp; ")
        if run.timeline_path.exists():
            parts.append(
                f"<a id='timeline' href='{_e(_file_href(full_id, 'timeline.html'))}'>timeline</a> &nbsp; "
            )
        if run.counterexample_path.exists():
            parts.append(
                f"<a id='counterexample' href='{_e(_file_href(full_id, 'counterexample.html'))}'>"
                "counterexample</a> &nbsp; "
            )
        parts.append(f"<a id='zip' href='/zip/{_e(quote(full_id))}.zip'>download as zip</a></p>")
        pngs = sorted(run.plots_dir.glob("*.png")) if run.plots_dir.is_dir() else []
        if pngs:
            parts.append("<h2>Plots</h2>")
            for png in pngs:
                rel = f"plots/{png.name}"
                parts.append(
                    f"<figure><img alt='{_e(png.name)}' src='{_e(_file_href(full_id, rel))}'>"
                    f"<figcaption>{_e(png.name)}</figcaption></figure>"
                )
        parts.append("<h2>Files</h2><ul id='files'>")
        for rel, size in self._files(run):
            parts.append(f"<li><a href='{_e(_file_href(full_id, rel))}'>{_e(rel)}</a> ({size:,} bytes)</li>")
        parts.append("</ul>")
        return _page(f"{full_id}", "".join(parts))

    def _files(self, run: RunDir) -> list[tuple[str, int]]:
        out = []
        base = run.path.resolve()
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                p = Path(dirpath) / name
                try:
                    if not p.resolve().is_relative_to(base):
                        continue
                    out.append((p.relative_to(base).as_posix(), p.stat().st_size))
                except OSError:
                    continue
                if len(out) >= MAX_LISTED_FILES:
                    return out
        return out

    # ----------------------------------------------------------------------------- resolution
    def resolve_run(self, run_id: str) -> RunDir:
        """The run `[store/...]<test-name>/<stamp>` below the root; StoreError for any other id."""
        parts = run_id.strip("/").split("/")
        if len(parts) < 2 or not all(valid_name(p) for p in parts[:-1]):
            raise StoreError(f"bad run id {run_id!r}")
        store = Store(self.store.root.joinpath(*parts[:-2]), create=False) if len(parts) > 2 else self.store
        run = store.run("/".join(parts[-2:]))
        if not run.path.resolve().is_relative_to(self.root):
            raise StoreError("run outside the store")
        return run

    def split_file_path(self, rest: str) -> tuple[RunDir, str, str]:
        """(run, its id, the file's path in it) from `[store/...]<test-name>/<stamp>/<file>`."""
        parts = rest.split("/")
        at = next((i for i, p in enumerate(parts) if i >= 1 and STAMP_RE.match(p)), None)
        if at is None or at + 1 >= len(parts):
            raise StoreError("bad file url")
        run_id = "/".join(parts[: at + 1])
        return self.resolve_run(run_id), run_id, "/".join(parts[at + 1 :])

    def resolve_file(self, run: RunDir, rel: str) -> Path:
        """The file `rel` inside `run`, or StoreError: no absolute paths, no '..', no symlink escapes."""
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if not parts or any(p == ".." or "\x00" in p or "\\" in p for p in parts) or rel.startswith("/"):
            raise StoreError(f"bad file path {rel!r}")
        base = run.path.resolve()
        path = (base / Path(*parts)).resolve()
        if not path.is_relative_to(base):
            raise StoreError(f"bad file path {rel!r}")
        if rel == "report.html" and not path.exists():
            with self._publishing:  # one run at a time: matplotlib's pyplot is not thread-safe
                if not path.exists():
                    try:
                        publish(run)
                    except Exception as exc:  # a damaged run has no report: say why, never a 500
                        raise StoreError(f"no report for this run: {type(exc).__name__}: {exc}") from None
        if not path.is_file():
            raise FileNotFoundError(rel)
        return path

    def zip_run(self, run: RunDir) -> tempfile.SpooledTemporaryFile:  # type: ignore[type-arg]
        """The run's directory as a zip (spooled to disk past 64 MiB); symlinks that leave it are skipped."""
        buf = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 - the caller closes it
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=5) as zf:
            prefix = run.run_id.replace("/", "_")
            for rel, _size in self._files(run):
                zf.write(run.path.resolve() / rel, f"{prefix}/{rel}")
        buf.seek(0)
        return buf


def allowed_hosts(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str] | None:
    """The Host header values a browser sends to this server (with and without the port), so a page
    from another site cannot reach it through a DNS name rebound to our address. None (anything goes)
    only for a wildcard bind with nothing named in `extra`: every name of the machine is then valid."""
    names = {h.lower().strip("[]") for h in extra}
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        names.add(host.lower())
        ip = None
    if ip is not None:
        if ip.is_unspecified:
            if not names:
                return None
            names |= {"127.0.0.1", "::1", "localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
        names.add(str(ip))
        if ip.is_loopback:
            names |= {"localhost", "127.0.0.1", "::1"}
    out = set()
    for n in names:
        shown = f"[{n}]" if ":" in n else n
        out |= {shown, f"{shown}:{port}"}
    return frozenset(out)


def make_handler(view: StoreView) -> type[BaseHTTPRequestHandler]:
    """A request handler class that serves `view`."""
    return type("Handler", (_Handler,), {"view": view})


HTML_TYPE = "text/html; charset=utf-8"


class _Handler(BaseHTTPRequestHandler):
    """Serves the pages of a StoreView (the `view` class attribute, set by make_handler)."""

    view: StoreView
    server_version = "faultline-serve"
    sys_version = ""
    timeout = CONNECTION_TIMEOUT_S  # per blocking read or write on the connection

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default; errors still go out
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def _send(
        self,
        status: int,
        body: bytes | None,
        ctype: str,
        head: bool,
        csp: str = PAGE_CSP,
        extra: dict[str, str] | None = None,
        stream: Any = None,
        length: int | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length if length is not None else len(body or b"")))
        self.send_header("Content-Security-Policy", csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if head:
            return
        if stream is not None:
            shutil.copyfileobj(stream, self.wfile)
        elif body:
            self.wfile.write(body)

    def _error(self, status: HTTPStatus, message: str, head: bool) -> None:
        body = _page(
            f"{status.value} {status.phrase}",
            f"<h1>{status.value} {_e(status.phrase)}</h1><p>{_e(message)}</p>",
        )
        self._send(status.value, body, HTML_TYPE, head)

    def _dispatch(self, head: bool) -> None:
        hosts = getattr(self.server, "allowed_hosts", None)
        host = (self.headers.get("Host") or "").strip().lower()
        if hosts is not None and host and host not in hosts:
            self._error(
                HTTPStatus.MISDIRECTED_REQUEST, f"this server does not answer for host {host!r}", head
            )
            return
        try:
            self._route(head)
        except (StoreError, FileNotFoundError, NotADirectoryError) as exc:
            self._error(HTTPStatus.NOT_FOUND, str(exc), head)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
        except Exception as exc:  # one bad run must not take the server down
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}", head)

    def _route(self, head: bool) -> None:
        view = self.view
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        if path in ("/", "/index.html"):
            self._send(200, view.index(query), HTML_TYPE, head)
        elif path == "/favicon.ico":  # browsers ask for it on every page: no icon, and no 404 for it
            self.send_response(HTTPStatus.NO_CONTENT)
            self.end_headers()
        elif path == "/campaigns":
            self._send(200, view.campaigns_page(), HTML_TYPE, head)
        elif path == "/scorecard":
            stores = query.get("store")
            card = view.scorecard(stores[0] if stores else None)
            if isinstance(card, Path):  # a scorecard.html from before scorecard.json existed
                self._send(200, card.read_bytes(), HTML_TYPE, head, csp=FILE_CSP)
            else:
                self._send(200, card, HTML_TYPE, head)
        elif path.startswith("/run/"):
            run_id = path[len("/run/") :].strip("/")
            self._send(200, view.run_page(view.resolve_run(run_id), run_id), HTML_TYPE, head)
        elif path.startswith("/files/"):
            self._send_file(path[len("/files/") :], head)
        elif path.startswith("/zip/") and path.endswith(".zip"):
            self._send_zip(path[len("/zip/") : -len(".zip")], head)
        else:
            raise StoreError(f"no page {path}")

    def _send_file(self, file_path: str, head: bool) -> None:
        """One file of a run, as it is on disk, under the strict file CSP."""
        run, _run_id, rel = self.view.split_file_path(file_path)
        file = self.view.resolve_file(run, rel)
        ctype = (
            TEXT_TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        )
        if ctype.startswith("text/") or ctype == "application/json":
            ctype += "; charset=utf-8"
        with open(file, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            self._send(200, None, ctype, head, csp=FILE_CSP, stream=fh, length=size)

    def _send_zip(self, run_id: str, head: bool) -> None:
        """A run's directory as a zip download."""
        run = self.view.resolve_run(run_id)
        with self.view.zip_run(run) as buf:
            buf.seek(0, io.SEEK_END)
            size = buf.tell()
            buf.seek(0)
            name = run.run_id.replace("/", "_") + ".zip"
            self._send(
                200,
                None,
                "application/zip",
                head,
                stream=buf,
                length=size,
                extra={"Content-Disposition": f'attachment; filename="{name}"'},
            )


class BoundedHTTPServer(HTTPServer):
    """An HTTP server with a fixed number of worker threads: accepted connections wait in one selector
    until their request arrives (dropped after `idle_timeout_s`, the oldest first beyond `max_waiting`),
    then one of `workers` threads serves it. Idle or slow clients cost a file descriptor, never a thread."""

    request_queue_size = 128
    allow_reuse_address = True
    # set by make_server; the handler reads `verbose` and `allowed_hosts` with defaults, as a bare server
    # lacks them
    view: StoreView
    verbose: bool
    allowed_hosts: frozenset[str] | None

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        workers: int = WORKERS,
        max_waiting: int = MAX_WAITING,
        idle_timeout_s: float = CONNECTION_TIMEOUT_S,
    ) -> None:
        # everything server_close needs exists before binding: a bind that fails (the port taken, a host
        # that does not resolve) calls server_close, and no thread starts until the socket is bound
        self.idle_timeout_s, self.max_waiting = idle_timeout_s, max_waiting
        self._incoming: queue.SimpleQueue[tuple[socket.socket, Any]] = queue.SimpleQueue()
        self._ready: queue.SimpleQueue[tuple[socket.socket, Any] | None] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        super().__init__(address, handler)
        self._threads = [threading.Thread(target=self._wait_loop, name="serve-wait", daemon=True)]
        self._threads += [
            threading.Thread(target=self._work_loop, name=f"serve-{i}", daemon=True) for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Called for each accepted connection: hand it to the waiting room, never a new thread."""
        self._incoming.put((request, client_address))
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:  # the wake-up socket is full: the waiter is awake anyway
            pass

    def _wait_loop(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        waiting: dict[socket.socket, tuple[Any, float]] = {}  # insertion order: oldest first
        try:
            while not self._closing.is_set():
                now = time.monotonic()
                soonest = min((d for _, d in waiting.values()), default=now + 1.0)
                for key, _ in sel.select(max(0.0, min(soonest - now, 1.0))):
                    if key.data is None:
                        self._accept_waiting(sel, waiting)
                    else:
                        sock = cast(socket.socket, key.fileobj)  # only sockets are registered with data
                        sel.unregister(sock)
                        addr, _ = waiting.pop(sock)
                        self._ready.put((sock, addr))
                now = time.monotonic()
                for sock in [s for s, (_, d) in waiting.items() if d <= now]:
                    self._drop(sel, waiting, sock)
        finally:
            for sock in list(waiting):
                self._drop(sel, waiting, sock)
            sel.close()

    def _accept_waiting(
        self, sel: selectors.BaseSelector, waiting: dict[socket.socket, tuple[Any, float]]
    ) -> None:
        try:
            while self._wake_r.recv(4096, socket.MSG_DONTWAIT):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                sock, addr = self._incoming.get_nowait()
            except queue.Empty:
                return
            sel.register(sock, selectors.EVENT_READ, addr)
            waiting[sock] = (addr, time.monotonic() + self.idle_timeout_s)
            while len(waiting) > self.max_waiting:
                self._drop(sel, waiting, next(iter(waiting)))

    def _drop(
        self,
        sel: selectors.BaseSelector,
        waiting: dict[socket.socket, tuple[Any, float]],
        sock: socket.socket,
    ) -> None:
        sel.unregister(sock)
        waiting.pop(sock, None)
        self.shutdown_request(sock)

    def _work_loop(self) -> None:
        while True:
            item = self._ready.get()
            if item is None:
                return
            sock, addr = item
            try:
                self.finish_request(sock, addr)
            except Exception:
                self.handle_error(sock, addr)
            finally:
                self.shutdown_request(sock)

    def server_close(self) -> None:
        self._closing.set()
        self._wake()
        for _ in self._threads[1:]:
            self._ready.put(None)
        for t in self._threads:
            t.join(timeout=CONNECTION_TIMEOUT_S + 5)
        self._wake_r.close()
        self._wake_w.close()
        super().server_close()


def make_server(
    root: Path | str,
    host: str = "127.0.0.1",
    port: int = 8080,
    verbose: bool = False,
    allow_hosts: Iterable[str] = (),
    **limits: Any,
) -> BoundedHTTPServer:
    """A server for the stores at or below `root` (port 0 picks a free port: see `server.server_address`).
    `allow_hosts` names extra Host header values to answer (a name the machine is reached by);
    `limits` go to BoundedHTTPServer (workers, max_waiting, idle_timeout_s)."""
    view = StoreView(root)
    server = BoundedHTTPServer((host, port), make_handler(view), **limits)
    server.verbose = verbose
    server.allowed_hosts = allowed_hosts(host, server.server_address[1], allow_hosts)
    server.view = view
    return server
