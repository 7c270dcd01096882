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
import mimetypes
import os
import shutil
import tempfile
import threading
import zipfile
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from faultline.checkers._html import head
from faultline.results.publish import publish
from faultline.results.store import RunDir, RunInfo, Store, StoreError

PAGE_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-ancestors 'none'"
FILE_CSP = "sandbox allow-scripts allow-popups; frame-ancestors 'self'"
TEXT_TYPES = {".jsonl": "text/plain", ".log": "text/plain", ".edn": "text/plain", ".txt": "text/plain",
              ".json": "application/json"}
MAX_LISTED_FILES = 2000
VERDICT_CLASSES = ("valid", "invalid", "unknown", "unchecked", "broken")



def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _run_href(run_id: str) -> str:
    return "/run/" + quote(run_id) + "/"


def _file_href(run_id: str, rel: str) -> str:
    return "/files/" + quote(run_id) + "/" + quote(rel)


def _page(title: str, body: str) -> bytes:
    return (f"{head(title)}<nav><a href='/'>runs</a><a href='/scorecard'>scorecard</a></nav>"
            f"{body}</body></html>\n").encode()


class StoreView:
    """Renders pages for one store; the HTTP handler only routes."""

    def __init__(self, root: Path | str) -> None:
        self.store = Store(root, create=False)
        self.root = self.store.root.resolve()
        self._publishing = threading.Lock()

    # ----------------------------------------------------------------------------- the run list
    def index(self, query: dict[str, list[str]]) -> bytes:
        runs = self.store.runs()
        want = {k: (query.get(k) or [""])[0] for k in ("workload", "nemesis", "verdict")}

        def keep(r: RunInfo) -> bool:
            return ((not want["workload"] or r.workload == want["workload"])
                    and (not want["nemesis"] or want["nemesis"] in (r.nemesis or ["none"]) or want["nemesis"] == r.nemesis_label)
                    and (not want["verdict"] or r.verdict_label == want["verdict"]))

        options = {
            "workload": sorted({r.workload for r in runs if r.workload}),
            "nemesis": sorted({n for r in runs for n in (r.nemesis or ["none"])}),
            "verdict": list(VERDICT_CLASSES),
        }
        shown = [r for r in runs if keep(r)]
        parts = [f"<h1>Runs in {_e(self.store.root.name)}</h1><form method='get' action='/' id='filters'>"]
        for name, values in options.items():
            parts.append(f"<label>{name} <select name='{name}' id='f-{name}'><option value=''>all</option>")
            for v in values:
                sel = " selected" if v == want[name] else ""
                parts.append(f"<option value='{_e(v)}'{sel}>{_e(v)}</option>")
            parts.append("</select></label>")
        parts.append("<button type='submit'>filter</button></form>")
        parts.append(f"<p id='count'>{len(shown)} of {len(runs)} runs</p>")
        parts.append("<table id='runs'><tr><th>started</th><th>test</th><th>workload</th><th>nemesis</th>"
                     "<th>bugs</th><th>seed</th><th>verdict</th><th>duration (s)</th><th>ops</th></tr>")
        for r in shown:
            dur = "" if r.duration_s is None else f"{r.duration_s:.1f}"
            parts.append(
                f"<tr class='{_e(r.verdict_label)}'><td><a class='run' href='{_e(_run_href(r.run_id))}'>{_e(r.stamp)}</a>"
                f"</td><td>{_e(r.test_name)}</td><td>{_e(r.workload)}</td><td>{_e(r.nemesis_label)}</td>"
                f"<td>{_e(r.bug_label)}</td><td>{_e(r.seed)}</td><td class='verdict'>{_e(r.verdict_label)}</td>"
                f"<td>{dur}</td><td>{_e(r.ops)}</td></tr>")
        parts.append("</table>")
        return _page(f"runs - {self.store.root.name}", "".join(parts))

    # ----------------------------------------------------------------------------- one run
    def run_page(self, run: RunDir) -> bytes:
        info = run.info()
        rid = run.run_id
        parts = [f"<h1>{_e(info.test_name)}</h1><table id='summary'>"]
        for k, v in (("run", rid), ("workload", info.workload), ("nemesis", info.nemesis_label),
                     ("bugs", info.bug_label), ("seed", info.seed), ("started", info.start_time),
                     ("duration (s)", info.duration_s), ("ops", info.ops), ("status", info.status)):
            parts.append(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>")
        parts.append(f"<tr class='{_e(info.verdict_label)}'><th>verdict</th>"
                     f"<td class='verdict'>{_e(info.verdict_label)}</td></tr></table>")
        parts.append(f"<p><a id='report' href='{_e(_file_href(rid, 'report.html'))}'>report</a> &nbsp; ")
        if run.timeline_path.exists():
            parts.append(f"<a id='timeline' href='{_e(_file_href(rid, 'timeline.html'))}'>timeline</a> &nbsp; ")
        if run.counterexample_path.exists():
            parts.append(f"<a id='counterexample' href='{_e(_file_href(rid, 'counterexample.html'))}'>"
                         "counterexample</a> &nbsp; ")
        parts.append(f"<a id='zip' href='/zip/{_e(quote(rid))}.zip'>download as zip</a></p>")
        pngs = sorted(run.plots_dir.glob("*.png")) if run.plots_dir.is_dir() else []
        if pngs:
            parts.append("<h2>Plots</h2>")
            for png in pngs:
                rel = f"plots/{png.name}"
                parts.append(f"<figure><img alt='{_e(png.name)}' src='{_e(_file_href(rid, rel))}'>"
                             f"<figcaption>{_e(png.name)}</figcaption></figure>")
        parts.append("<h2>Files</h2><ul id='files'>")
        for rel, size in self._files(run):
            parts.append(f"<li><a href='{_e(_file_href(rid, rel))}'>{_e(rel)}</a> ({size:,} bytes)</li>")
        parts.append("</ul>")
        return _page(f"{rid}", "".join(parts))

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
        run = self.store.run(run_id)
        if not run.path.resolve().is_relative_to(self.root):
            raise StoreError("run outside the store")
        return run

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
                    publish(run)
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

    def scorecard(self) -> Path | None:
        p = self.store.root / "_score" / "scorecard.html"
        return p if p.is_file() else None


def make_handler(view: StoreView) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "faultline-serve"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # quiet by default; errors still go out
            if getattr(self.server, "verbose", False):
                super().log_message(format, *args)

        def do_HEAD(self) -> None:
            self._dispatch(head=True)

        def do_GET(self) -> None:
            self._dispatch(head=False)

        def _send(self, status: int, body: bytes | None, ctype: str, head: bool, csp: str = PAGE_CSP,
                  extra: dict[str, str] | None = None, stream: Any = None, length: int | None = None) -> None:
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
            body = _page(f"{status.value} {status.phrase}", f"<h1>{status.value} {_e(status.phrase)}</h1><p>{_e(message)}</p>")
            self._send(status.value, body, "text/html; charset=utf-8", head)

        def _dispatch(self, head: bool) -> None:
            try:
                self._route(head)
            except (StoreError, FileNotFoundError, NotADirectoryError) as exc:
                self._error(HTTPStatus.NOT_FOUND, str(exc), head)
            except (BrokenPipeError, ConnectionResetError):
                pass
            except Exception as exc:  # one bad run must not take the server down
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}", head)

        def _route(self, head: bool) -> None:
            url = urlsplit(self.path)
            path = unquote(url.path)
            html_type = "text/html; charset=utf-8"
            if path in ("/", "/index.html"):
                self._send(200, view.index(parse_qs(url.query)), html_type, head)
            elif path == "/scorecard":
                card = view.scorecard()
                if card is None:
                    self._send(200, _page("scorecard", "<h1>No scorecard yet</h1><p>Run <code>faultline score "
                                          "STORE</code> first.</p>"), html_type, head)
                else:
                    self._send(200, card.read_bytes(), html_type, head, csp=FILE_CSP)
            elif path.startswith("/run/"):
                run = view.resolve_run(path[len("/run/"):].strip("/"))
                self._send(200, view.run_page(run), html_type, head)
            elif path.startswith("/files/"):
                rest = path[len("/files/"):]
                bits = rest.split("/", 2)
                if len(bits) < 3:
                    raise StoreError("bad file url")
                run = view.resolve_run(f"{bits[0]}/{bits[1]}")
                file = view.resolve_file(run, bits[2])
                ctype = TEXT_TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
                if ctype.startswith("text/") or ctype == "application/json":
                    ctype += "; charset=utf-8"
                with open(file, "rb") as fh:
                    size = os.fstat(fh.fileno()).st_size
                    self._send(200, None, ctype, head, csp=FILE_CSP, stream=fh, length=size)
            elif path.startswith("/zip/") and path.endswith(".zip"):
                run = view.resolve_run(path[len("/zip/"):-len(".zip")])
                with view.zip_run(run) as buf:
                    buf.seek(0, io.SEEK_END)
                    size = buf.tell()
                    buf.seek(0)
                    name = run.run_id.replace("/", "_") + ".zip"
                    self._send(200, None, "application/zip", head, stream=buf, length=size,
                               extra={"Content-Disposition": f'attachment; filename="{name}"'})
            else:
                raise StoreError(f"no page {path}")

    return Handler


def make_server(root: Path | str, host: str = "127.0.0.1", port: int = 8080, verbose: bool = False) -> ThreadingHTTPServer:
    """A server for the store at `root` (port 0 picks a free port: see `server.server_address`)."""
    view = StoreView(root)
    server = ThreadingHTTPServer((host, port), make_handler(view))
    server.daemon_threads = True
    server.verbose = verbose  # type: ignore[attr-defined]
    return server
