"""Live progress on the console while a run is going: phase, elapsed / limit, ops/s, ok / fail / info
counts and the faults currently active. A rich live panel on a terminal, a plain line every few seconds
otherwise (logs of CI jobs), nothing with `--quiet`."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any


class Progress:
    def __init__(self, time_limit: float, live: bool | None = None, interval_s: float = 5.0) -> None:
        self.time_limit = time_limit
        self.live = sys.stderr.isatty() if live is None else live
        self.interval_s = interval_s
        self._phase = "starting"
        self._recorder: Any = None
        self._faults: Any = None
        self._t0 = time.monotonic()
        self._main_t0: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._display: Any = None

    # ------------------------------------------------------------ runner hooks
    def phase(self, name: str) -> None:
        self._phase = name
        if name == "main":
            self._main_t0 = time.monotonic()
        if not self.live:  # every phase named as it starts, between the periodic lines
            print(f"faultline run: {name}" if self._recorder is None else f"faultline run: {self.line()}",
                  file=sys.stderr, flush=True)

    def attach(self, recorder: Any, faults: Any) -> None:
        self._recorder = recorder
        self._faults = faults
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._display is not None:
            try:
                self._display.stop()
            except Exception:
                pass
            self._display = None

    # ------------------------------------------------------------ rendering
    def line(self) -> str:
        rec = self._recorder
        if rec is None:
            return f"{self._phase}"
        now_ns = rec.now()
        elapsed = (time.monotonic() - self._main_t0) if self._main_t0 else 0.0
        rate = rec.client_ok_since(max(0, now_ns - 5_000_000_000)) / 5.0
        c = rec.counts
        faults = self._faults.describe() if self._faults is not None else "none"
        return (f"{self._phase:<7} {elapsed:6.1f}/{self.time_limit:.0f} s  {rate:7.1f} ok/s  "
                f"ok {c['ok']}  fail {c['fail']}  info {c['info']}  faults: {faults}")

    def _table(self) -> Any:
        from rich.table import Table

        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold")
        t.add_column()
        rec = self._recorder
        c = rec.counts
        elapsed = (time.monotonic() - self._main_t0) if self._main_t0 else 0.0
        rate = rec.client_ok_since(max(0, rec.now() - 5_000_000_000)) / 5.0
        t.add_row("phase", self._phase)
        t.add_row("elapsed", f"{elapsed:.1f} / {self.time_limit:.0f} s")
        t.add_row("ops/s", f"{rate:.1f} ok/s (last 5 s)")
        t.add_row("ops", f"[green]ok {c['ok']}[/]  [red]fail {c['fail']}[/]  [yellow]info {c['info']}[/]")
        t.add_row("faults", self._faults.describe() if self._faults is not None else "none")
        return t

    def _loop(self) -> None:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._display = Live(self._table(), console=Console(stderr=True), refresh_per_second=4,
                                 transient=False)
            self._display.start()
            while not self._stop.wait(0.25):
                try:
                    self._display.update(self._table())
                except Exception:
                    pass
            return
        while not self._stop.wait(self.interval_s):
            print(f"faultline run: {self.line()}", file=sys.stderr, flush=True)
