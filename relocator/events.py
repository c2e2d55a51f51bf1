"""The realistic event mix: web, cron and load-balancer events, deterministic per seed.

One generator for everything that needs "events like production": the ``riak-events
loadgen`` command (:mod:`relocator.loadgen`), the main job, the tests, and the benchmarks
(``bench/events.py`` re-exports :func:`generate_events`; the codec benchmark anchors are
measured on this shape).

The shape: 15-30 keys per event, about 700 bytes as compact JSON, a few nested dicts and
lists, mixed ints / floats / bools / null, some non-ASCII text, and many values repeated
across events (hosts, URLs, user agents, status codes), which is what makes
``dedupe_strings`` and compression pay off. Every event carries ``type``, ``subtype``,
``dc``, ``host`` (a ``web-``, ``lb-`` or ``cron-`` host of its dc) and, unless the caller
stamps it later, ``epoch``. Web events carry the fields the example substreams read
(``url``, ``status``, ``duration_ms``, ``request_id``).

The mix is about 60 % web (subtypes ``www``, ``api``, ``mobile``), 30 % load balancer
(``haproxy``) and 10 % cron (``batch``). The same arguments always yield the same events,
on every machine and Python version (only ``random.Random`` with an integer seed is used).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

Event = dict[str, Any]

#: The epoch :func:`generate_events` stamps on every event.
EPOCH = 1_700_000_000
#: The dcs events are spread over unless the caller names others.
DCS = ("ams1", "ams4", "lhr2")
#: Hosts per dc and role: ``web-001.ams1.example.com`` ... ``web-015.ams1.example.com``.
HOSTS_PER_ROLE = 15
URLS = (
    "/",
    "/index.html",
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
    "/static/css/main.css",
    "/static/js/app.js",
    "/myreservations",
    "/login",
    "/logout",
    "/city/dk/copenhagen.da.html",
    "/landmark/de/brandenburger-tor.de.html",
    "/help",
)
USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Mobile/15E148",
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.6099.43 Mobile Safari/537.36",
    "curl/7.88.1",
)
LANGS = ("en-gb", "en-us", "nl", "de", "fr", "ja", "da", "es", "it", "zh-cn")
CITIES = (
    "Amsterdam",
    "Paris",
    "K\u00f8benhavn",
    "M\u00fcnchen",
    "\u6771\u4eac",
    "S\u00e3o Paulo",
    "Z\u00fcrich",
    "New York",
    "Krak\u00f3w",
    "\u0391\u03b8\u03ae\u03bd\u03b1",
)
STATUSES = (200, 200, 200, 200, 200, 200, 301, 302, 304, 404, 500, 503)
METHODS = ("GET", "GET", "GET", "GET", "POST", "HEAD")
#: What a typical web substream reads of these events (``fields=``): a third of a web
#: event's top-level keys; the projected decode's workload in the benchmarks and the
#: codec's instruction guard.
WEB_SUBSTREAM_FIELDS = (
    "epoch",
    "type",
    "subtype",
    "dc",
    "host",
    "status",
    "url",
    "method",
    "duration_ms",
    "search.city",
)
CRON_JOBS = (
    "rotate_logs",
    "refresh_availability",
    "send_reminders",
    "rebuild_sitemap",
    "expire_sessions",
    "sync_rates",
)
BACKENDS = tuple(f"10.{a}.{b}.{c}:8080" for a in (16, 17) for b in (1, 2) for c in (10, 11, 12))
TAGS = ("canary", "beta", "bot", "internal", "slow", "cached", "retry")
EXPERIMENTS = ("new_search_box", "price_badge_v2", "map_first", "cheaper_nearby", "dark_mode")


SUBTYPES = {
    "web": ("www", "www", "api", "mobile"),
    "lb": ("haproxy",),
    "cron": ("batch",),
}


def _common(rng: random.Random, epoch: int | None, kind: str, dcs: Sequence[str]) -> Event:
    dc = rng.choice(dcs)
    ev: Event = {} if epoch is None else {"epoch": epoch}
    ev.update(
        {
            "type": kind,
            "subtype": rng.choice(SUBTYPES[kind]),
            "dc": dc,
            "host": f"{kind}-{rng.randrange(1, HOSTS_PER_ROLE + 1):03d}.{dc}.example.com",
            "pid": rng.randrange(1000, 65000),
            "version": "2024.11." + str(rng.randrange(1, 30)),
            "is_production": rng.random() < 0.95,
            "request_id": f"{rng.getrandbits(128):032x}",
            "tags": rng.sample(TAGS, rng.randrange(0, 4)),
            "trace": {
                "span": f"{rng.getrandbits(64):016x}",
                "parent": f"{rng.getrandbits(64):016x}" if rng.random() < 0.7 else None,
            },
        }
    )
    return ev


def _web(rng: random.Random, ev: Event) -> None:
    ev.update(
        {
            "method": rng.choice(METHODS),
            "url": rng.choice(URLS),
            "status": rng.choice(STATUSES),
            "duration_ms": round(rng.lognormvariate(4.0, 0.8), 3),
            "bytes_sent": rng.randrange(200, 250_000),
            "user_agent": rng.choice(USER_AGENTS),
            "lang": rng.choice(LANGS),
            "user_id": rng.randrange(1, 10**9) if rng.random() < 0.4 else None,
            "session": f"{rng.getrandbits(64):016x}",
            "is_mobile": rng.random() < 0.45,
            "referer": rng.choice(URLS) if rng.random() < 0.6 else None,
            "search": {
                "city": rng.choice(CITIES),
                "checkin": f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
                "nights": rng.randrange(1, 15),
                "adults": rng.choice((1, 2, 2, 2, 3, 4)),
                "rooms": 1,
            },
            "experiments": {
                name: rng.randrange(0, 3) for name in rng.sample(EXPERIMENTS, rng.randrange(1, 4))
            },
            "timings": [round(rng.random() * 50, 2) for _ in range(rng.randrange(2, 6))],
        }
    )


def _cron(rng: random.Random, ev: Event) -> None:
    job = rng.choice(CRON_JOBS)
    ok = rng.random() < 0.97
    ev.update(
        {
            "job": job,
            "schedule": rng.choice(("*/5 * * * *", "0 * * * *", "30 3 * * *")),
            "exit_code": 0 if ok else rng.choice((1, 2, 137)),
            "success": ok,
            "runtime_s": round(rng.expovariate(1 / 40), 3),
            "rows_processed": rng.randrange(0, 2_000_000),
            "owner": rng.choice(("team-search", "team-payments", "team-infra")),
            "message": "ok"
            if ok
            else rng.choice(("timeout talking to db", "\u00e9chec: disk full")),
            "args": ["--dc", ev["dc"], "--batch", str(rng.choice((100, 500, 1000)))],
            "resources": {
                "max_rss_kb": rng.randrange(50_000, 900_000),
                "cpu_user_s": round(rng.random() * 30, 3),
                "cpu_sys_s": round(rng.random() * 5, 3),
            },
            "retries": rng.choice((0, 0, 0, 1, 2)),
            "notify": None,
        }
    )


def _lb(rng: random.Random, ev: Event) -> None:
    ev.update(
        {
            "frontend": rng.choice(("https-in", "https-in", "api-in")),
            "backend": rng.choice(("web_pool", "api_pool", "static_pool")),
            "server": rng.choice(BACKENDS),
            "client_ip": f"{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}."
            f"{rng.randrange(256)}",
            "status": rng.choice(STATUSES),
            "bytes_read": rng.randrange(100, 500_000),
            "tq": rng.randrange(0, 5),
            "tw": rng.randrange(0, 20),
            "tc": rng.randrange(0, 5),
            "tr": rng.randrange(1, 800),
            "tt": rng.randrange(1, 2000),
            "termination_state": rng.choice(("----", "----", "----", "CD--", "sH--")),
            "conn": {
                "active": rng.randrange(1, 4000),
                "frontend": rng.randrange(1, 2000),
                "backend": rng.randrange(1, 500),
                "retries": rng.choice((0, 0, 1)),
            },
            "queue": [rng.randrange(0, 10), rng.randrange(0, 10)],
            "http_request": rng.choice(METHODS) + " " + rng.choice(URLS) + " HTTP/1.1",
            "ssl": {
                "version": rng.choice(("TLSv1.3", "TLSv1.2")),
                "cipher": rng.choice(("TLS_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256")),
            },
            "weight": round(rng.random(), 4),
        }
    )


#: (type, filler, weight): the mix is 6 web : 3 lb : 1 cron.
KINDS: tuple[tuple[str, Callable[[random.Random, Event], None], int], ...] = (
    ("web", _web, 6),
    ("cron", _cron, 1),
    ("lb", _lb, 3),
)


def iter_events(
    seed: int, *, epoch: int | None = EPOCH, dcs: Sequence[str] = DCS
) -> Iterator[Event]:
    """An endless deterministic stream of events of the mix (see the module docstring).

    Args:
        seed: the ``random.Random`` seed; the same arguments give the same stream.
        epoch: stamped as ``"epoch"`` on every event; None leaves the field out (the
            emitter stamps the frame, see :func:`relocator.loadgen.run`).
        dcs: the dcs to spread events over (each event's ``dc`` and its host's domain).
    """
    if not dcs:
        raise ValueError("dcs must name at least one dc")
    rng = random.Random(seed)
    names = [k for k, _, w in KINDS for _ in range(w)]
    fill = {k: f for k, f, _ in KINDS}
    while True:
        kind = rng.choice(names)
        ev = _common(rng, epoch, kind, dcs)
        fill[kind](rng, ev)
        yield ev


def generate_events(n: int = 20_000, seed: int = 20240601) -> list[Event]:
    """``n`` deterministic events for ``seed``, all stamped with :data:`EPOCH`."""
    return list(itertools.islice(iter_events(seed), n))
