"""Live progress on the console while a run is going: phase, elapsed / limit, ops/s, ok / fail / info
counts and the faults currently active. A rich live panel on a terminal, a plain line every few seconds
otherwise (logs of CI jobs), nothing with `--quiet`. Every phase after the main one (healing, the quiet
period, final reads, checking, writing the report, teardown) is named with its own elapsed time, so the
display never stands still or counts past the time limit.

Also the one place that makes a console for the CLI's own tables (`console`) and says how to call
`faultline` again (`command`)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

MIN_PIPE_WIDTH = 120  # columns of a table written to a file or pipe (CI logs): never clipped to 80

# what each runner phase is called on the console: its key first, so a script watching for a phase
# (tests/test_harness_interruptions.py) still finds it, then what is going on in words
PHASE_NAMES = {
    "heal": "heal: healing the faults",
    "quiet": "quiet: waiting for recovery",
    "final": "final reads",
    "healing": "healing: stopping the workers, healing the cluster",
    "checking": "checking the history",
    "writing": "writing results and report",
    "teardown": "teardown: taking the cluster down",
}


def console(stderr: bool = False) -> Any:
    """A rich Console for stdout (or stderr): as wide as the terminal, or at least 120 columns when the
    output is not a terminal, so a table in a CI log or a pipe keeps its full cell names."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(file=stream)
    try:
        wanted = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        wanted = 0
    return Console(file=stream, width=max(MIN_PIPE_WIDTH, wanted))


def command() -> str:
    """How to run `faultline` from here: its name when it is on PATH, else the venv's script (as a
    relative path when under the current directory), else `python -m faultline`."""
    script = Path(sys.executable).parent / "faultline"
    on_path = shutil.which("faultline")
    if on_path and (not script.exists() or Path(on_path).resolve() == script.resolve()):
        return "faultline"
    if script.exists():
        try:
            return str(script.relative_to(Path.cwd()))
        except ValueError:
            return str(script)
    return f"{sys.executable} -m faultline"


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
        self._phase_t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._display: Any = None

    # ------------------------------------------------------------ runner hooks
    def phase(self, name: str) -> None:
        self._phase = PHASE_NAMES.get(name, name)
        self._phase_t0 = time.monotonic()
        if name == "main":
            self._main_t0 = time.monotonic()
        if not self.live:  # every phase named as it starts, between the periodic lines
            print(
                f"faultline run: {self._phase}"
                if self._recorder is None
                else f"faultline run: {self.line()}",
                file=sys.stderr,
                flush=True,
            )

    @property
    def _after_main(self) -> bool:
        return self._main_t0 is not None and self._phase != "main"

    def _elapsed(self) -> str:
        """The main phase against its limit; any later phase on its own clock."""
        if self._after_main:
            return f"{time.monotonic() - self._phase_t0:.1f} s"
        elapsed = (time.monotonic() - self._main_t0) if self._main_t0 else 0.0
        return f"{min(elapsed, self.time_limit):.1f}/{self.time_limit:g} s"

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
        c = rec.counts
        counts = f"ok {c['ok']}  fail {c['fail']}  info {c['info']}"
        if self._after_main:
            return f"{self._phase}  {self._elapsed()}  {counts}"
        rate = rec.client_ok_since(max(0, rec.now() - 5_000_000_000)) / 5.0
        faults = self._faults.describe() if self._faults is not None else "none"
        return f"{self._phase:<7} {self._elapsed():>12}  {rate:7.1f} ok/s  {counts}  faults: {faults}"

    def _table(self) -> Any:
        from rich.table import Table

        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold")
        t.add_column()
        rec = self._recorder
        c = rec.counts
        t.add_row("phase", self._phase)
        t.add_row("elapsed", self._elapsed())
        if not self._after_main:
            rate = rec.client_ok_since(max(0, rec.now() - 5_000_000_000)) / 5.0
            t.add_row("ops/s", f"{rate:.1f} ok/s (last 5 s)")
        t.add_row("ops", f"[green]ok {c['ok']}[/]  [red]fail {c['fail']}[/]  [yellow]info {c['info']}[/]")
        t.add_row("faults", self._faults.describe() if self._faults is not None else "none")
        return t

    def _loop(self) -> None:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._display = Live(
                self._table(), console=Console(stderr=True), refresh_per_second=4, transient=False
            )
            self._display.start()
            while not self._stop.wait(0.25):
                try:
                    self._display.update(self._table())
                except Exception:
                    pass
            return
        while not self._stop.wait(self.interval_s):
            print(f"faultline run: {self.line()}", file=sys.stderr, flush=True)
