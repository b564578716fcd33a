"""Helpers for benchmark suites: latency statistics, peak memory of a measured step, aligned tables."""

from __future__ import annotations

import multiprocessing
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def latency(fn: Callable[[str], object], queries: list[str], warmup: int = 3) -> dict[str, float]:
    """Median and p95 seconds per call of fn(query), after a few warm-up calls."""
    for q in queries[:warmup]:
        fn(q)
    times = []
    for q in queries:
        started = time.perf_counter()
        fn(q)
        times.append(time.perf_counter() - started)
    return {"median_s": float(np.median(times)), "p95_s": float(np.percentile(times, 95)), "queries": len(queries)}


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _child(fn, conn):
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark to the current RSS
    except OSError:
        pass
    start = _rss_kib("VmRSS")
    try:
        result = fn()
        conn.send(("ok", result, (_rss_kib("VmHWM") - start) / 1024))
    except BaseException as err:  # report to the parent rather than die silently
        conn.send(("error", repr(err), 0.0))
    finally:
        conn.close()


def measured(fn: Callable[[], dict]) -> dict:
    """Runs fn in a forked copy of this process; returns its result plus `peak_mib`, the growth of resident
    memory over the copy's starting point (data already built by the parent is shared, not counted)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(fn, child))
    proc.start()
    child.close()
    status, result, peak = parent.recv()
    proc.join()
    if status != "ok":
        raise RuntimeError(f"benchmark step failed: {result}")
    return {**result, "peak_mib": peak}


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """rows as an aligned text table; columns are (key, header, format)."""
    head = "  ".join(f"{h:>14}" for _, h, _ in columns)
    lines = [head]
    for row in rows:
        cells = []
        for key, _, fmt in columns:
            value = row.get(key)
            cells.append(f"{'-':>14}" if value is None else f"{format(value, fmt):>14}")
        lines.append("  ".join(cells))
    return "\n".join(lines)


def machine_line() -> str:
    """The machine's core count and load, printed beside every suite's figures."""
    one, five, fifteen = os.getloadavg()
    return (
        f"machine: {os.cpu_count()} cores, load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min), "
        f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}"
    )


def server_lm(model: str, api_base: str | None, timeout_s: float, **kwargs):
    """A dspy.LM for a benchmark: greedy, uncached (every request reaches the server), its key from
    $DEEPRESEARCH_API_KEY (a local server needs none, LiteLLM's OpenAI client wants one)."""
    import dspy

    key = os.environ.get("DEEPRESEARCH_API_KEY", "local")
    return dspy.LM(model, api_base=api_base, api_key=key, temperature=0.0, timeout=timeout_s, cache=False, **kwargs)
