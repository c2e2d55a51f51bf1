"""A load generator: a realistic mix of web, cron and load-balancer events.

``generate(n, seed, epoch, dcs)`` yields ``(type, subtype, dc, event)``: web events
(~60 %, subtypes ``www``/``api``/``mobile``), load-balancer events (~30 %, subtype
``haproxy``), cron events (~10 %, subtype ``batch``). Each is a nested dict of 15-30
keys (~600-900 bytes as JSON) with many values repeated across events (hosts, URLs,
user agents, status codes), the property that makes dedupe and compression pay off, and
some non-ASCII text. Deterministic for a given seed (``random.Random``).

``run`` sends them at a rate through :mod:`relocator.producer` and reports counts.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

from relocator.producer import Emitter, TcpEmitter, UdpEmitter

Event = dict[str, Any]

_HOSTS = [
    f"{r}-{i:03d}.{dc}.example.com"
    for r in ("app", "web", "lb", "cron")
    for i in range(1, 13)
    for dc in ("ams1", "ams4", "lhr2")
]
_URLS = [
    "/",
    "/search",
    "/searchresults.html",
    "/hotel/nl/amsterdam-centre.html",
    "/hotel/fr/paris-opera.html",
    "/hotel/jp/tokyo-ginza.ja.html",
    "/book/confirm",
    "/book/details",
    "/api/v2/availability",
    "/api/v2/prices",
    "/api/v1/reviews",
    "/myreservations",
    "/login",
    "/city/dk/copenhagen.da.html",
    "/help",
]
_AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko)"
    " Version/17.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "curl/7.88.1",
]
_CITIES = ["Amsterdam", "Paris", "K\u00f8benhavn", "M\u00fcnchen", "\u6771\u4eac", "Z\u00fcrich"]
_LANGS = ["en-gb", "en-us", "nl", "de", "fr", "ja", "da"]
_STATUS = [200, 200, 200, 200, 200, 301, 302, 304, 404, 500]
_JOBS = ["billing.reconcile", "search.reindex", "mail.digest", "cleanup.sessions"]


def _web(rng: random.Random) -> Event:
    return {
        "url": rng.choice(_URLS),
        "method": rng.choice(("GET", "GET", "POST")),
        "status": rng.choice(_STATUS),
        "user_agent": rng.choice(_AGENTS),
        "lang": rng.choice(_LANGS),
        "city": rng.choice(_CITIES),
        "user": {
            "id": rng.randrange(10**9),
            "logged_in": rng.random() < 0.4,
            "currency": rng.choice(("EUR", "USD", "GBP", "JPY")),
        },
        "timings": {
            "total_ms": round(rng.uniform(5, 900), 2),
            "db_ms": round(rng.uniform(0, 200), 2),
            "render_ms": round(rng.uniform(1, 120), 2),
        },
        "experiments": [f"exp_{rng.randrange(40)}" for _ in range(rng.randrange(1, 6))],
        "session": f"{rng.getrandbits(64):016x}",
        "bytes_out": rng.randrange(200, 200_000),
    }


def _lb(rng: random.Random) -> Event:
    return {
        "frontend": rng.choice(("https_in", "http_in", "api_in")),
        "backend": rng.choice(("web_pool", "api_pool", "static_pool")),
        "server": rng.choice(_HOSTS),
        "client_ip": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}",
        "status": rng.choice(_STATUS),
        "bytes_read": rng.randrange(100, 50_000),
        "timers": {
            "Tq": rng.randrange(5),
            "Tw": rng.randrange(3),
            "Tc": rng.randrange(2),
            "Tr": rng.randrange(400),
            "Tt": rng.randrange(900),
        },
        "termination_state": rng.choice(("--", "--", "--", "CD", "SD")),
        "request": f"GET {rng.choice(_URLS)} HTTP/1.1",
        "retries": rng.randrange(2),
    }


def _cron(rng: random.Random) -> Event:
    return {
        "job": rng.choice(_JOBS),
        "exit_code": rng.choice((0, 0, 0, 0, 1)),
        "duration_s": round(rng.uniform(0.1, 600), 3),
        "host": rng.choice(_HOSTS),
        "stats": {
            "rows": rng.randrange(10**6),
            "errors": rng.randrange(3),
            "warnings": [f"w{rng.randrange(9)}" for _ in range(rng.randrange(3))],
        },
        "output": "ok" if rng.random() < 0.9 else "Traceback: Zeitüberschreitung",
    }


def generate(
    n: int, seed: int = 1, epoch: int | None = None, dcs: tuple[str, ...] = ("ams1",)
) -> Iterator[tuple[str, str, str, Event]]:
    """``n`` events as (type, subtype, dc, event); ``epoch`` None: stamped when emitted."""
    rng = random.Random(seed)
    for i in range(n):
        r = rng.random()
        if r < 0.6:
            type_, subtype, ev = "web", rng.choice(("www", "www", "api", "mobile")), _web(rng)
        elif r < 0.9:
            type_, subtype, ev = "lb", "haproxy", _lb(rng)
        else:
            type_, subtype, ev = "cron", "batch", _cron(rng)
        ev["host"] = ev.get("host") or rng.choice(_HOSTS)
        ev["seq"] = i
        if epoch is not None:
            ev["epoch"] = epoch
        yield type_, subtype, rng.choice(dcs), ev


def raw_size(event: Event) -> int:
    """The event's size as compact JSON: the "raw MB/s" the benchmarks report."""
    return len(json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode())


def run(
    host: str,
    port: int,
    *,
    transport: str,
    rate: float,
    duration_s: float,
    dcs: tuple[str, ...],
    seed: int,
) -> dict[str, Any]:
    """Emit for ``duration_s`` at ``rate`` events/s; returns counts and achieved rate."""
    emitter: Emitter = (
        TcpEmitter(host, port, dc=dcs[0])
        if transport == "tcp"
        else UdpEmitter(host, port, dc=dcs[0])
    )
    start = time.monotonic()
    sent = 0
    raw = 0
    for type_, subtype, dc, ev in generate(10**12, seed, dcs=dcs):
        now = time.monotonic()
        if now - start >= duration_s:
            break
        if rate > 0 and sent >= rate * (now - start):
            time.sleep(min(0.01, sent / rate - (now - start)))
        if emitter.emit(ev, type_, subtype, dc):
            sent += 1
            raw += raw_size(ev) if sent % 100 == 0 else 0
    elapsed = time.monotonic() - start
    if isinstance(emitter, TcpEmitter):
        emitter.flush(30.0)
    emitter.close()
    return {
        "sent": sent,
        "seconds": round(elapsed, 2),
        "events_per_s": round(sent / elapsed),
        "raw_mb_per_s_est": round(raw * 100 / elapsed / 1e6, 2),
        "counts": dict(emitter.counts),
    }
