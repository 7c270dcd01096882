"""`faultline serve` in a real browser (headless Chromium): pages render, links work, values are escaped,
and no URL reaches a file outside the store."""

from __future__ import annotations

import http.client
import io
import json
import re
import shutil
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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
    bad = store.create_run("evil-test", {"workload": EVIL, "nemesis": ["partition"], "bugs": [EVIL], "seed": 9})
    bad.history_path.write_text(json.dumps({"index": 0, "time": 1, "type": "invoke", "process": 0, "f": "read",
                                            "key": EVIL, "value": None}) + "\n")
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
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp / 'profile'}", *args], capture_output=True, text=True, timeout=180)


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
    for path in (f"/files/{run.run_id}/../../secret.txt", f"/files/{run.run_id}/%2e%2e/%2e%2e/secret.txt",
                 f"/files/{run.run_id}/..%2F..%2Fsecret.txt", "/files/../secret.txt/x",
                 f"/files/{evil.run_id}/escape-link", f"/files/{run.run_id}//etc/passwd",
                 "/run/..%2F..%2Fetc/", "/zip/../../etc.zip", "/secret.txt", "/files/evil-test/latest/test.json"):
        status, body = raw_get(base, path)
        assert status == 404, path
        assert b"outside any run" not in body and b"root:" not in body
    status, body = raw_get(base, f"/files/{run.run_id}/test.json")
    assert status == 200 and json.loads(body)["workload"] == "register"
