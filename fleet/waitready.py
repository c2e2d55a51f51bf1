"""Wait until a daemon's health URL answers 200: ``python -m fleet.waitready URL``.

Used by the systemd units (``ExecStartPost=``) so that a unit counts as started only
once the daemon is ready, and by scripts that start a daemon in the background. Prints
one line and exits 0 when ready, 1 when the deadline passes (naming the last answer or
error), 2 on a bad argument.
"""

from __future__ import annotations

import argparse
import sys
import time

import httpx

__all__ = ["wait_ready"]


def wait_ready(url: str, *, timeout_s: float, interval_s: float = 0.5) -> str | None:
    """Poll ``url`` until it answers 200.

    Returns:
        None when ready, else the last failure in words (status code or error).
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        try:
            answer = httpx.get(url, timeout=min(5.0, max(0.1, timeout_s)))
            if answer.status_code == 200:
                return None
            last = f"HTTP {answer.status_code}: {answer.text.strip()[:200]}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() + interval_s > deadline:
            return last
        time.sleep(interval_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleet.waitready", description=__doc__)
    parser.add_argument("url", help="health URL, e.g. http://127.0.0.1:9141/readyz")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="give up after this")
    args = parser.parse_args(argv)
    if not args.url.startswith(("http://", "https://")) or args.timeout_s <= 0:
        print(f"waitready: need an http(s) URL and a positive --timeout-s, got {args.url!r}")
        return 2
    failure = wait_ready(args.url, timeout_s=args.timeout_s)
    if failure is None:
        print(f"ready: {args.url}")
        return 0
    print(f"not ready after {args.timeout_s:g} s: {args.url}: {failure}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
