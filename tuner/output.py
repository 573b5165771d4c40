"""Shared output helpers: one JSON document on stdout for --json, rich tables otherwise."""

from __future__ import annotations

import json
import math
import sys
import threading
import time

from rich.console import Console

# Tables go to stdout; progress bars and notes to stderr so --json stays clean. Off a terminal
# (piped, redirected, captured) nothing is wrapped or cut: lines and tables keep their own width, so
# grep and diff see whole lines (rich would otherwise wrap at 80 columns or the width given).
UNWRAPPED = 100_000


def _console() -> Console:
    if sys.stdout.isatty():
        return Console(highlight=False)
    return Console(width=UNWRAPPED, soft_wrap=True, highlight=False)


console = _console()
err_console = Console(stderr=True, highlight=False)


def _clean(obj):
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def emit_json(obj) -> None:
    """Print exactly one JSON document on stdout (NaN/inf become null: JSON has none)."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2) + "\n")
    sys.stdout.flush()


class Progress:
    """Progress of ``total`` steps on stderr: a rich bar with ETA on a terminal; elsewhere (a log
    file, CI, a remote run) a plain line at most every ``every_s`` seconds and at the end, so that
    a long run shows how far it got even if it is stopped; with ``lines=False`` nothing there (a
    compile's progress: the one-line error contract holds for captured stderr), and the terminal's
    bar goes away when done (``transient``). Shown only once the work has taken ``delay_s`` (a
    quick run stays silent); silent when disabled or with nothing to do. Lines read
    ``LABEL: 5 points to measure`` and ``LABEL: 2/5 points (40%), 3 s, about 4 s left`` (``unit``
    and ``todo`` name the steps)."""

    def __init__(self, enabled: bool, total: int, label: str, stream=None, every_s: float = 15.0,
                 delay_s: float = 0.0, unit: str = "points", todo: str = "to measure", lines: bool = True,
                 transient: bool = False):
        self.enabled, self.total, self.label = enabled and total > 0, total, label
        self.unit, self.todo, self.lines, self.transient = unit, todo, lines, transient
        self._p = self._task = self._timer = None
        self._stream, self._every, self._delay = stream, float(every_s), float(delay_s)
        self._done, self._t0, self._last, self._shown = 0, 0.0, None, False
        self._lock = threading.Lock()

    def __enter__(self):
        if not self.enabled:
            return self
        self._t0 = time.perf_counter()
        if self._delay <= 0:
            self._show()
        else:
            self._timer = threading.Timer(self._delay, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _show(self) -> None:
        with self._lock:
            if self._shown or not self.enabled:
                return
            self._shown = True
            if self._stream is None and err_console.is_terminal:
                self._p = _shared_bar(self)
                if self._p is not None:
                    self._task = self._p.add_task(self.label, total=self.total, completed=self._done)
                return
            if self._stream is None and not self.lines:
                return
            self._stream = self._stream or sys.stderr
            self._line(f"{self.label}: {self.total} {self.unit} {self.todo}")
            if self._done:
                self._report(time.perf_counter())

    def _line(self, text: str) -> None:
        print(text, file=self._stream, flush=True)

    def advance(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            if self._done >= self.total:      # more steps than announced: nothing more to say
                return
            self._done += 1
            if self._p is not None:
                self._p.advance(self._task)
                return
            now = time.perf_counter()
            if not self._shown or self._stream is None or (self._done < self.total and self._last is not None
                                                           and now - self._last < self._every):
                return      # not shown yet, shown nowhere (lines=False off a terminal), or too soon
            self._report(now)

    def _report(self, now: float) -> None:
        self._last = now
        el = now - self._t0
        left = el / self._done * (self.total - self._done)
        eta = f", about {left:.0f} s left" if self._done < self.total else ""
        self._line(f"{self.label}: {self._done}/{self.total} {self.unit} "
                   f"({100 * self._done // self.total}%), {el:.0f} s{eta}")

    def __exit__(self, *exc):
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self.enabled = False         # a timer that fires now shows nothing
            if self._p is not None:
                _release_bar(self, *exc)
        return False


# One rich bar on the terminal at a time (rich allows one live display): a Progress shown while
# another one is adds its line to that bar (the default tie bound, computed inside a sweep's compiles).
_BAR: dict = {}


def _shared_bar(owner: Progress):
    """The rich Progress on stderr that ``owner`` adds its task to: the one shown, else a new one;
    None where another live display (a rich status) holds the terminal."""
    if _BAR:
        return _BAR["bar"]
    from rich.errors import LiveError
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.progress import Progress as Bar

    bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
              TextColumn("ETA"), TimeRemainingColumn(), console=err_console, transient=owner.transient)
    try:
        bar.__enter__()
    except LiveError:
        return None
    _BAR.update(bar=bar, owner=owner)
    return bar


def _release_bar(user: Progress, *exc) -> None:
    if _BAR.get("owner") is user:
        _BAR.pop("bar").__exit__(*exc)
        _BAR.clear()
