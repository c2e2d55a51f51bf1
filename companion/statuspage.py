"""The node's status page: one HTML document, no external assets, plots as inline SVG.

For each substream: state (enabled, disabled, not loaded: ``substreams.state``,
the words of ``substream status``; load failed), version, runs, ok, failures by kind
(the plugin's), shed results apart (the plugin did not run), p50/p99 wall time, last
error, two small plots over the last ten minutes (runs and failures per 10 s; slowest
run per 10 s), and, when they disagree, the versions this node's workers and the other
live nodes have loaded. A tiny inline script records each plot's drawn size in
``data-drawn-width`` so a headless browser test can check that the plots were laid
out. The page reloads itself every ``REFRESH_S`` seconds (a meta refresh: no script
needed). Pure logic, no I/O.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from companion import defaults
from companion.stats import FAILURE_KINDS
from substreams.results import DISABLED
from substreams.state import state_of

__all__ = ["REFRESH_S", "render_status"]

#: Seconds between the page's reloads (its plots move in 10 s steps).
REFRESH_S = 10

_W, _H = 240, 40

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}
.state-enabled{color:#1a7f37;font-weight:bold}
.state-disabled,.state-load-failed{color:#c62828;font-weight:bold}
.state-not-loaded{color:#777}
.versions{color:#b26a00;font-weight:bold}
.err{font-family:monospace;font-size:12px;max-width:24em;white-space:pre-wrap;word-break:break-word}
td.name{max-width:14em;overflow-wrap:anywhere}
td.charts{white-space:nowrap;width:250px}
svg.plot{background:#fafafa;border:1px solid #eee}
.summary span{margin-right:2em;display:inline-block}
"""

_SCRIPT = """
for (const svg of document.querySelectorAll('svg.plot')) {
  const box = svg.getBoundingClientRect();
  svg.setAttribute('data-drawn-width', Math.round(box.width));
  svg.setAttribute('data-drawn-height', Math.round(box.height));
}
document.body.setAttribute('data-rendered', 'yes');
"""


def _conflict_text(conflict: Mapping[str, Any] | None) -> str:
    """'versions differ: workers a (1), b (1); node n2 has c' or '' when all agree."""
    if not conflict:
        return ""
    parts = []
    if "workers" in conflict:
        counts = ", ".join(f"{v} ({n})" for v, n in conflict["workers"].items())
        parts.append(f"workers {counts}")
    for node, versions in conflict.get("nodes", {}).items():
        parts.append(f"node {node} has {', '.join(versions) or 'none'}")
    return "versions differ: " + "; ".join(parts)


def _fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _series(points: Mapping[int, list[float]], now: float) -> list[tuple[float, float, float]]:
    step, count = defaults.SERIES_STEP_S, defaults.SERIES_POINTS
    last = int(now // step * step)
    out = []
    for i in range(count):
        bucket = last - (count - 1 - i) * step
        runs, failures, max_ms = points.get(bucket, [0, 0, 0.0])
        out.append((float(runs), float(failures), float(max_ms)))
    return out


def _bars_svg(name: str, series: list[tuple[float, float, float]]) -> str:
    top = max([r + f for r, f, _ in series] + [1.0])
    width = _W / len(series)
    parts = []
    for i, (runs, failures, _) in enumerate(series):
        x = i * width
        ok_runs = max(0.0, runs - failures)
        h_ok = ok_runs / top * (_H - 2)
        h_fail = failures / top * (_H - 2)
        if h_ok > 0:
            parts.append(
                f'<rect class="ok" x="{x:.1f}" y="{_H - h_ok:.1f}" width="{width - 0.5:.1f}" '
                f'height="{h_ok:.1f}" fill="#4caf50"/>'
            )
        if h_fail > 0:
            parts.append(
                f'<rect class="fail" x="{x:.1f}" y="{_H - h_ok - h_fail:.1f}" '
                f'width="{width - 0.5:.1f}" height="{h_fail:.1f}" fill="#e53935"/>'
            )
    label = html.escape(f"{name}: runs (green) and failures (red) per 10 s, last 10 minutes")
    return (
        f'<svg class="plot runs" role="img" aria-label="{label}" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}"><title>{label}</title>{"".join(parts)}</svg>'
    )


def _line_svg(name: str, series: list[tuple[float, float, float]]) -> str:
    top = max([m for _, _, m in series] + [1.0])
    step = _W / max(1, len(series) - 1)
    points = " ".join(
        f"{i * step:.1f},{_H - 1 - m / top * (_H - 2):.1f}" for i, (_, _, m) in enumerate(series)
    )
    label = html.escape(f"{name}: slowest run per 10 s (max {top:.0f} ms)")
    return (
        f'<svg class="plot latency" role="img" aria-label="{label}" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}"><title>{label}</title>'
        f'<polyline points="{points}" fill="none" stroke="#1e88e5" stroke-width="1.5"/></svg>'
    )


def render_status(
    *,
    node: str,
    merged: Mapping[str, Any],
    loaded: Mapping[str, Mapping[str, Any]],
    load_failures: list[tuple[str, str]],
    disabled: Mapping[str, Mapping[str, Any]],
    settings: Mapping[str, Any],
    now: float | None = None,
    refresh_s: int = REFRESH_S,
) -> str:
    """The status page (reloaded by the browser every ``refresh_s``: a meta refresh,
    so it needs no script).

    Args:
        node: this node's name, for the title.
        merged: :func:`companion.stats.merge` of every worker's snapshot.
        loaded: substream name -> {version, types, subtypes, timeout_s, memory_mb, origin}.
        load_failures: (origin, reason) of plugins that did not load.
        disabled: :meth:`companion.disabled.DisabledSet.all`.
        settings: settings to show (:func:`companion.settings.as_mapping`).
        now: unix time of the page (default: now).
        refresh_s: seconds between reloads.

    Returns:
        The HTML document.
    """
    now = time.time() if now is None else now
    esc = html.escape
    stats = merged.get("substreams", {})
    rows = []
    for name in sorted(set(loaded) | set(stats)):
        info = loaded.get(name)
        s = stats.get(name, {})
        version = info["version"] if info else "-"
        marker = disabled.get(name)
        state = state_of([version] if info else [], marker)
        failures = s.get("failures", {})
        failure_text = ", ".join(f"{k} {failures[k]}" for k in FAILURE_KINDS if failures.get(k))
        last_error = s.get("last_error") or ""
        if state == "disabled" and marker is not None:
            last_error = f"{DISABLED}: {marker.get('reason', '')}\n{last_error}"
        where = f" (key {s['last_error_key']})" if s.get("last_error_key") else ""
        conflict = _conflict_text(merged.get("version_conflicts", {}).get(name))
        agreement = "disagree" if conflict else "agree"
        series = _series({int(k): v for k, v in s.get("series", {}).items()}, now)
        reads = "all" if not info or not info["types"] else ", ".join(info["types"])
        rows.append(
            f'<tr class="substream" data-name="{esc(name)}" data-state="{state}"'
            f' data-versions="{agreement}">'
            f'<td class="name">{esc(name)}<br>'
            f"<small>{esc(version)} · reads {esc(reads)}</small>"
            + (f'<br><small class="versions">{esc(conflict)}</small>' if conflict else "")
            + "</td>"
            f'<td class="state state-{state.replace(" ", "-")}">{state}</td>'
            f'<td class="runs">{s.get("runs", 0)}</td><td class="ok">{s.get("ok", 0)}</td>'
            f'<td class="failures">{esc(failure_text) or "none"}</td>'
            f'<td class="shed">{s.get("shed", 0)}</td>'
            f'<td class="p50">{_fmt_ms(s.get("p50_ms"))}</td>'
            f'<td class="p99">{_fmt_ms(s.get("p99_ms"))}</td>'
            f'<td class="err">{esc((last_error + where)[:600])}</td>'
            f'<td class="charts">{_bars_svg(name, series)}<br>{_line_svg(name, series)}</td></tr>'
        )
    for origin, reason in load_failures:
        rows.append(
            f'<tr class="substream load-failed" data-name="{esc(origin)}" data-state="load failed">'
            f'<td class="name" title="{esc(origin)}">{esc(Path(origin).name)}</td>'
            f'<td class="state state-load-failed">load failed</td>'
            f'<td colspan="6"></td><td class="err">{esc(reason)}</td><td></td></tr>'
        )
    counters = merged.get("counters", {})
    summary = "".join(
        f"<span>{esc(k.replace('_', ' '))}: <b>{v}</b></span>" for k, v in sorted(counters.items())
    )
    config = "".join(f"<span>{esc(k)}: {esc(str(v))}</span>" for k, v in settings.items())
    plot_note = (
        "plots: runs (green) and failures (red) per 10 s; slowest run per 10 s (blue); "
        f"the page reloads every {refresh_s} s"
    )
    title = f"companion {node}" if node else "companion"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh_s}"><title>{esc(title)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>{esc(title)}</h1>
<p class="summary"><span>workers: <b>{merged.get("workers", 0)}</b></span>
<span>queued chunks: <b>{merged.get("queue_depth", 0)}</b></span>{summary}</p>
<p class="summary">{config}</p>
<p><small>{plot_note}</small></p>
<table id="substreams">
<thead><tr><th>substream</th><th>state</th><th>runs</th><th>ok</th><th>failures by kind</th>
<th title="results marked shed: the plugin did not run (overload, quarantine lane full)">shed</th>
<th>p50</th><th>p99</th><th>last error</th><th>last 10 minutes</th></tr></thead>
<tbody>
{"".join(rows) or '<tr><td colspan="10">no substreams loaded</td></tr>'}
</tbody></table>
<script>{_SCRIPT}</script>
</body></html>
"""
