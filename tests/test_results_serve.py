"""`faultline serve` in a real browser (headless Chromium): pages render, links work, values are escaped,
and no URL reaches a file outside the store."""

from __future__ import annotations

import http.client
import io
import json
import re
import shutil
import socket
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from campaign_files import fake_campaign

from faultline.results.publish import publish
from faultline.results.serve import make_server
from faultline.results.store import Store
from faultline.results.synth import synth_store

EVIL = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("serve") / "store"
    synth_store(root, runs=3, ops=150, anomaly_rate=0.0, seed=2, jobs=1)
    store = Store(root)
    bad = store.create_run(
        "evil-test", {"workload": EVIL, "nemesis": ["partition"], "bugs": [EVIL], "seed": 9}
    )
    bad.history_path.write_text(
        json.dumps(
            {"index": 0, "time": 1, "type": "invoke", "process": 0, "f": "read", "key": EVIL, "value": None}
        )
        + "\n"
    )
    bad.finish({"valid": False, "linearizable": {"valid": False, "failure": {"op": {"f": EVIL}}}})
    publish(bad)
    (bad.path / "escape-link").symlink_to("/etc/passwd")
    (root / "secret.txt").write_text("outside any run")
    server = make_server(root, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def chromium(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe
    return subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp / 'profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


def dom(url: str, tmp: Path) -> str:
    out = chromium(["--dump-dom", url], tmp)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def raw_get(base: str, path: str) -> tuple[int, bytes]:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", path)  # sent as is: no client-side normalisation of '..'
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.chromium
def test_pages_render_and_links_work_in_chromium(site: tuple[str, Path], tmp_path: Path) -> None:
    base, _root = site
    index = dom(base + "/", tmp_path)
    assert "4 of 4 runs" in index
    links = re.findall(r'href="(/run/[^"]+)"', index)
    assert len(links) == 4
    # newest first: the evil run was created last (real clock), the synthetic ones carry 2026-01.. stamps
    assert links[0].startswith("/run/evil-test/")
    assert 'class="invalid"' in index and 'class="unchecked"' in index
    # escaped: the payload shows up as text, never as an element
    assert "&lt;img src=x onerror=alert(1)&gt;" in index and "<img" not in index
    # filters (server-side: plain HTTP is enough)
    filtered = raw_get(base, "/?verdict=invalid")[1].decode()
    assert "1 of 4 runs" in filtered and "evil-test" in filtered
    by_nemesis = raw_get(base, "/?nemesis=kill&workload=register")[1].decode()
    assert "1 of 4 runs" in by_nemesis
    # a run page, its report and files
    run_page = dom(base + links[0], tmp_path)
    assert 'id="summary"' in run_page and "<img" not in run_page.split('id="files"')[0].split("<h2>Plots")[0]
    report_href = re.search(r'id="report" href="([^"]+)"', run_page).group(1)
    report = dom(base + report_href.replace("&amp;", "&"), tmp_path)
    assert 'id="verdict"' in report and "invalid" in report and "What was wrong" in report
    assert "onerror=alert" not in report.replace("&lt;img src=x onerror=alert(1)&gt;", "")
    synth_run = raw_get(base, links[-1])[1].decode()
    files = re.findall(r"href='(/files/[^']+)'", synth_run)
    assert any(f.endswith("/history.jsonl") for f in files) and any(f.endswith("/test.json") for f in files)
    report_url = base + re.search(r"id='report' href='([^']+)'", synth_run).group(1)
    # the synthetic run has no report yet: the first request writes it; a screenshot shows it renders
    shot = tmp_path / "report.png"
    out = chromium([f"--screenshot={shot}", "--window-size=1000,1400", report_url], tmp_path)
    assert out.returncode == 0 and shot.stat().st_size > 20_000
    synth_report = raw_get(base, report_url.removeprefix(base))[1].decode()
    assert "Nemesis timeline" in synth_report and "data:image/png;base64," in synth_report


@pytest.mark.chromium
def test_zip_download_and_no_path_escapes(site: tuple[str, Path]) -> None:
    base, root = site
    run = Store(root).runs()[-1]
    status, body = raw_get(base, f"/zip/{run.run_id}.zip")
    assert status == 200
    names = zipfile.ZipFile(io.BytesIO(body)).namelist()
    prefix = run.run_id.replace("/", "_")
    assert f"{prefix}/test.json" in names and f"{prefix}/history.jsonl" in names
    evil = next(r for r in Store(root).runs() if r.test_name == "evil-test")
    status, body = raw_get(base, f"/zip/{evil.run_id}.zip")
    assert status == 200 and all("escape-link" not in n for n in zipfile.ZipFile(io.BytesIO(body)).namelist())
    for path in (
        f"/files/{run.run_id}/../../secret.txt",
        f"/files/{run.run_id}/%2e%2e/%2e%2e/secret.txt",
        f"/files/{run.run_id}/..%2F..%2Fsecret.txt",
        "/files/../secret.txt/x",
        f"/files/{evil.run_id}/escape-link",
        f"/files/{run.run_id}//etc/passwd",
        "/run/..%2F..%2Fetc/",
        "/zip/../../etc.zip",
        "/secret.txt",
        "/files/evil-test/latest/test.json",
    ):
        status, body = raw_get(base, path)
        assert status == 404, path
        assert b"outside any run" not in body and b"root:" not in body
    status, body = raw_get(base, f"/files/{run.run_id}/test.json")
    assert status == 200 and json.loads(body)["workload"] == "register"


# ---------------------------------------------------------------------------------------------------------
# A store as `make demo` leaves it: a run at the top, a campaign's store one level down, with a scorecard.

CAMPAIGN = fake_campaign("web", [1], 1.5, 3)


def make_demo_store(root: Path) -> Path:
    """STORE with one plain run and STORE/campaign-web with a campaign of two cells, scored (pandas)."""
    from faultline.controller import campaign as cp
    from faultline.controller import testspec
    from faultline.controller.runner import run_once
    from faultline.results.engines import score_store

    root.mkdir(parents=True)
    (root.parent / "web.toml").write_text(CAMPAIGN)
    camp = cp.load(root.parent / "web.toml", store_override=root / "campaign-web")
    cp.execute(camp, lambda test, store: run_once(test, store, quiet=True, install_signals=False))
    score_store(camp.store, engine="pandas")
    plain = testspec.build_test(
        {
            "cluster": "fake",
            "workload": "set",
            "nemesis": "kill",
            "time_limit": 1,
            "concurrency": 2,
            "nemesis_interval": 0.3,
            "quiet_period": 0.1,
            "seed": 3,
        }
    )
    run_once(plain, root, quiet=True, install_signals=False)
    return root


def serving(root: Path, **limits: Any) -> tuple[Any, str]:
    server = make_server(root, "127.0.0.1", 0, **limits)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop(server: Any) -> None:
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    from faultline.controller.commands.serve import found

    root = make_demo_store(tmp_path_factory.mktemp("demo") / "store")
    server, base = serving(root)
    try:
        assert found(server.view) == f"3 runs in 2 stores under {root}: . (1), campaign-web (2)"
        yield base, root
    finally:
        stop(server)


def test_runs_are_found_at_any_depth_with_campaigns_and_their_scorecard(demo_site: tuple[str, Path]) -> None:
    base, _root = demo_site
    index = raw_get(base, "/")[1].decode()
    assert "3 of 3 runs in 2 stores" in index
    assert (
        index.count("/run/campaign-web/web-") == 2 and "/run/set/" not in index
    )  # the plain run's test is named after its workload
    status, body = raw_get(base, "/?store=campaign-web")
    assert status == 200 and "2 of 3 runs" in body.decode()
    campaigns = raw_get(base, "/campaigns")[1].decode()
    assert (
        "campaign-web" in campaigns
        and "2/2 met" in campaigns
        and "/scorecard?store=campaign-web" in campaigns
    )
    status, card = raw_get(base, "/scorecard")  # the only scorecard there is
    text = card.decode()
    assert status == 200 and "all expectations met: 2/2" in text and "Scorecard: campaign web" in text
    assert "verdict: false" not in text and ">false<" not in text and ">true<" not in text
    assert ">invalid<" in text and ">valid<" in text
    for href in re.findall(r"href='(/run/[^']+)'", text):
        assert raw_get(base, href)[0] == 200, href
    groups = text.split("id='groups'")[1].split("</table>")[0]
    no_bug = next(row for row in groups.split("<tr>") if "<td class=''>none</td>" in row.replace('"', "'"))
    assert (
        "<td class='n'>–</td>" in no_bug.split("</td>", 7)[7] + "</td>"
    )  # detection of a cell without a bug
    run_href = re.findall(r"href='(/run/campaign-web/[^']+)'", index)[0]
    run_page = raw_get(base, run_href)[1].decode()
    assert "/scorecard?store=campaign-web" in run_page and "/?store=campaign-web" in run_page


def test_an_empty_store_says_so(tmp_path: Path) -> None:
    from faultline.controller.commands.serve import found

    (tmp_path / "store" / "nothing-here").mkdir(parents=True)
    server, base = serving(tmp_path / "store")
    try:
        status, body = raw_get(base, "/")
        assert status == 200 and "No runs in" in body.decode() and "at any depth" in body.decode()
        assert found(server.view).startswith("no runs in")
        assert "No scorecard yet" in raw_get(base, "/scorecard")[1].decode()
    finally:
        stop(server)


def test_damaged_runs_are_listed_never_a_500(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    good = store.create_run("fine", {"workload": "register", "seed": 1})
    good.finish({"valid": True})
    cases = {
        "list-test": ("test.json", "[1, 2]"),
        "number-results": ("results.json", "7"),
        "bad-json": ("test.json", "{nope"),
        "string-results": ("results.json", '"valid"'),
        "odd-fields": ("results.json", '{"valid": [1], "_run": {"duration_s": "long", "ops": "many"}}'),
    }
    for name, (file, text) in cases.items():
        run = store.create_run(name, {"workload": "register", "seed": 1})
        (run.path / file).write_text(text)
    unreadable = store.create_run("unreadable", {"workload": "register"})
    unreadable.test_path.unlink()
    unreadable.test_path.mkdir()  # a directory where test.json should be: unreadable as a file
    server, base = serving(tmp_path / "store")
    try:
        status, body = raw_get(base, "/")
        page = body.decode()
        assert status == 200 and "7 of 7 runs" in page
        assert "<td class='verdict'>unknown</td>" in page  # odd fields: shown as unknown, not a crash
        assert page.count("<td class='verdict'>damaged</td>") == 5
        assert "test.json is not a JSON object" in page and "results.json is not a JSON object" in page
        for href in re.findall(r"href='(/run/[^']+)'", page):
            status, body = raw_get(base, href)
            assert status == 200, href
            for file_href in re.findall(r"href='(/files/[^']+report.html)'", body.decode()):
                assert raw_get(base, file_href)[0] in (200, 404), file_href
        assert raw_get(base, "/?verdict=damaged")[1].decode().count("class='run'") == 5
    finally:
        stop(server)


def raw_request(base: str, path: str, host: str | None) -> int:
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        head = (
            f"GET {path} HTTP/1.1\r\n"
            + (f"Host: {host}\r\n" if host is not None else "")
            + "Connection: close\r\n\r\n"
        )
        s.sendall(head.encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1])


def test_the_host_header_must_name_this_server(demo_site: tuple[str, Path]) -> None:
    base, _ = demo_site
    port = base.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", None):
        assert raw_request(base, "/", host) == 200, host
    for host in (
        f"evil.example:{port}",
        "evil.example",
        f"127.0.0.1.evil.example:{port}",
        f"10.0.0.1:{port}",
    ):
        assert raw_request(base, "/", host) == 421, host
    from faultline.results.serve import allowed_hosts

    assert allowed_hosts("0.0.0.0", 80) is None  # a wildcard bind answers every name of the machine
    named = allowed_hosts("0.0.0.0", 80, ["box.lan"])
    assert named is not None and "box.lan:80" in named and "evil.example:80" not in named


def test_idle_connections_take_no_threads_and_time_out(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.create_run("fine", {"workload": "register"}).finish({"valid": True})
    before = threading.active_count()
    server, base = serving(tmp_path / "store", workers=4, idle_timeout_s=3.0, max_waiting=1000)
    idle: list[socket.socket] = []
    try:
        started = threading.active_count()
        assert started <= before + 6  # serve_forever, the waiting room, four workers
        port = int(base.rsplit(":", 1)[1])
        for _ in range(800):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=30))
        assert raw_get(base, "/")[0] == 200  # served while 800 connections sit idle
        assert threading.active_count() <= started
        for s in idle[:50]:  # each idle connection is closed by the server after its timeout
            assert s.recv(1) == b""
    finally:
        for s in idle:
            s.close()
        stop(server)
    assert threading.active_count() <= before + 1


def test_waiting_room_drops_the_oldest_beyond_its_cap(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.create_run("fine", {"workload": "register"}).finish({"valid": True})
    server, base = serving(tmp_path / "store", workers=2, idle_timeout_s=60.0, max_waiting=10)
    port = int(base.rsplit(":", 1)[1])
    conns = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(30)]
    try:
        assert raw_get(base, "/")[0] == 200
        assert conns[0].recv(1) == b""  # dropped long before its idle timeout
    finally:
        for s in conns:
            s.close()
        stop(server)


@pytest.mark.chromium
def test_chromium_crawls_every_link_from_the_index(demo_site: tuple[str, Path], tmp_path: Path) -> None:
    """Every page reachable from the index loads with status 200 and no console error (failed loads and
    CSP violations included), and the web view's own pages fit a 1280 px window."""
    from headless import Browser

    base, _ = demo_site
    seen: set[str] = set()
    todo = [base + "/"]
    kinds: set[str] = set()
    with Browser(tmp_path / "profile") as browser:
        while todo and len(seen) < 500:
            url = todo.pop().split("#")[0]
            if url in seen or not url.startswith(base):
                continue
            seen.add(url)
            path = url.removeprefix(base)
            status, body = raw_get(base, path)
            assert status == 200, f"{path}: {status}"
            if not (body.lstrip()[:15].lower().startswith(b"<!doctype html") or path.endswith(".html")):
                continue
            errors = browser.load(url)
            assert errors == [], (path, errors)
            if not path.startswith("/files/"):
                assert browser.page_width() <= 1280, path
                kinds.add(path.split("?")[0].split("/")[1] or "index")
            todo += browser.links()
        assert {"index", "campaigns", "scorecard", "run"} <= kinds
        assert any("/report.html" in u for u in seen) and any("/timeline.html" in u for u in seen)
        assert any(u.endswith(".zip") for u in seen) and len(seen) > 30
        for name, path in (("index", "/"), ("scorecard", "/scorecard")):
            assert browser.load(base + path) == []
            browser.screenshot(tmp_path / f"{name}.png", height=800)
            assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_taken_port_or_a_host_that_does_not_resolve_is_one_line_and_254(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both once crashed (exit 255, a traceback): the failed bind closed a server that had no `_closing`."""
    from faultline.controller.cli import main

    (tmp_path / "store").mkdir()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    threads = threading.active_count()
    try:
        with pytest.raises(OSError):
            make_server(tmp_path / "store", "127.0.0.1", port)
        for host, p in (("127.0.0.1", port), ("no-such-host.invalid", 0)):
            assert main(["serve", str(tmp_path / "store"), "--host", host, "--port", str(p)]) == 254
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith(f"faultline serve: error: cannot listen on {host}:"), (
                err
            )
    finally:
        taken.close()
    assert threading.active_count() == threads  # no worker started for a server that never bound
