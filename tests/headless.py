"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: commands on
fd 3, replies and events on fd 4, JSON messages ended by a NUL byte), so a test sees what a console
would show: script errors, failed loads (a 404 image), Content-Security-Policy violations. Standard
library only; every wait has a deadline."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page; `load` navigates and returns the console errors it caused."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900) -> None:
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            raise BrowserError("chromium is not installed")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Chromium wants its ends as fds 3 and 4: bash moves them there in the child only
        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-pipe",
            "--disable-extensions",
            "--mute-audio",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        r, w = (
            fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome_r, from_chrome_w)
        )  # never 3 or 4
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{r} 4>&{w} {r}<&- {w}>&-', exe, *args],
            pass_fds=(r, w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(r)
        os.close(w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    # ------------------------------------------------------------------ protocol
    def _read_message(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no answer from chromium in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 16)
                if not chunk:
                    raise BrowserError("chromium closed its pipe")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: bool = False,
        timeout_s: float = 60.0,
    ) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def _wait_event(self, method: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if any(ev.get("method") == method for ev in self.events):
                return
            self.events.append(self._read_message(deadline))

    # ------------------------------------------------------------------ pages
    def load(self, url: str, timeout_s: float = 60.0) -> list[str]:
        """Navigates to `url`, waits for its load event, and returns the console errors it produced."""
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        self._wait_event("Page.loadEventFired", timeout_s)
        self.evaluate("1")  # a round trip, so events logged during the load have arrived
        errors = []
        for ev in self.events:
            p = ev.get("params", {})
            if ev.get("method") == "Runtime.exceptionThrown":
                errors.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
            elif ev.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(f"console.error: {[a.get('value') for a in p.get('args', [])]}")
            elif ev.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                errors.append(f"log: {p['entry'].get('text')} ({p['entry'].get('url')})")
        return errors

    def evaluate(self, expression: str) -> Any:
        """The JSON value of `expression` in the page (DevTools evaluation is not subject to the page's CSP)."""
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in res:
            raise BrowserError(f"evaluate failed: {res['exceptionDetails'].get('text')}")
        return res.get("result", {}).get("value")

    def links(self) -> list[str]:
        """Every link's absolute URL on the current page."""
        return self.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")

    def page_width(self) -> int:
        return int(self.evaluate("document.documentElement.scrollWidth"))

    def screenshot(self, path: Path, height: int | None = None) -> None:
        """A PNG of the page as a 1280-px-wide window shows it (the top `height` pixels, if given)."""
        params: dict[str, Any] = {"format": "png"}
        if height is not None:
            params["clip"] = {"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1}
        data = self.call("Page.captureScreenshot", params, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout_s=10)
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
