"""Requests per second and mean round trip of each fake service, against a bare http.server baseline.

Usage: ``python bench/services.py [--requests N] [--rounds R] [--json]``

One client (``http.client``, one keep-alive connection) in the same process as the servers sends N
sequential POSTs to each service, in R rounds of which the fastest counts, and the same to a baseline: a bare ``BaseHTTPRequestHandler`` on a
``ThreadingHTTPServer`` (HTTP/1.1, Nagle off) that reads the body and answers ``{"ok":true}``. The
ratio is the service's requests per second over the baseline's: what the fake's own work (routing,
JSON, digests, recording, hook calls) costs. Client and servers share one interpreter (and its GIL),
so absolute figures are a floor; the ratio is the point. A last row shows the baseline handler as
Python writes it by default (Nagle on, headers and body in two writes): the ~40 ms it pays per request
is why the fakes disable Nagle.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from killpoint.fake_services import Services  # noqa: E402

Request = tuple[str, bytes, dict[str, str]]


class Bare(BaseHTTPRequestHandler):
    """The baseline: read the body, answer a tiny JSON, in one write."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"ok":true}'
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))

    def log_message(self, format: str, *args: object) -> None:
        pass


class NagleDefault(Bare):
    """The baseline as usually written: Nagle on, headers then body in two writes."""

    disable_nagle_algorithm = False

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def measure(port: int, make: Callable[[int], Request], n: int, rounds: int = 1) -> tuple[float, float]:
    """Send ``n`` requests over one connection, ``rounds`` times; return the best round's
    (requests per second, mean round trip in ms)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(min(50, n)):  # warm up
        send(conn, make(-1 - i))
    best = float("inf")
    for r in range(rounds):
        started = time.perf_counter()
        for i in range(n):
            send(conn, make(r * n + i))
        best = min(best, time.perf_counter() - started)
    conn.close()
    return n / best, best / n * 1000


def send(conn: http.client.HTTPConnection, request: Request) -> None:
    path, body, headers = request
    conn.request("POST", path, body, {"Content-Type": "application/json", **headers})
    response = conn.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"{path}: {response.status}")


def workloads() -> dict[str, tuple[str, Callable[[int], Request]]]:
    """Per service: (server, request maker for the i-th request)."""
    email = {"to": "ana@example.com", "template": "invoice", "data": {"invoice": "inv-1"}}
    charge = {"account": "acct_1", "amount_cents": 1250, "currency": "usd"}
    chat = {"model": "claude-sonnet-4-6", "max_tokens": 256,
            "messages": [{"role": "user", "content": "Invoice inv-1 for 12.50 USD: approve?"}]}
    return {
        "mailer": ("mailer", lambda i: ("/runs/b/v1/emails", json.dumps(email).encode(), {"Idempotency-Key": f"e{i}"})),
        "ledger": ("ledger", lambda i: ("/runs/b/v1/charges", json.dumps(charge).encode(), {"Idempotency-Key": f"c{i}"})),
        "ledger (replays)": ("ledger", lambda i: ("/runs/b/v1/charges", json.dumps(charge).encode(),
                                                  {"Idempotency-Key": "same"})),
        "webhook": ("mailer", lambda i: ("/runs/b/v1/webhooks", b'{"event":"paid"}', {})),
        "model": ("model", lambda i: ("/runs/b/v1/messages", json.dumps(chat).encode(),
                                      {"Authorization": "Bearer bench"})),
    }


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


def run(n: int, rounds: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    baseline = serve(Bare)
    try:
        rps, rtt = measure(baseline.server_address[1], lambda i: ("/", b'{"event":"paid"}', {}), n, rounds)
        rows.append({"name": "baseline (bare http.server)", "requests": n, "rps": rps, "rtt_ms": rtt})
    finally:
        baseline.shutdown()
        baseline.server_close()
    with Services.start() as svc:
        for name, (server, make) in workloads().items():
            rps, rtt = measure(svc.ports[server], make, n, rounds)
            rows.append({"name": name, "requests": n, "rps": rps, "rtt_ms": rtt})
            svc.reset()
    nagle = serve(NagleDefault)
    try:
        few = min(n, 25)
        rps, rtt = measure(nagle.server_address[1], lambda i: ("/", b'{"event":"paid"}', {}), few)
        rows.append({"name": "bare http.server, Nagle on", "requests": few, "rps": rps, "rtt_ms": rtt})
    finally:
        nagle.shutdown()
        nagle.server_close()
    base_rps = float(rows[0]["rps"])  # type: ignore[arg-type]
    for row in rows:
        row["ratio"] = float(row["rps"]) / base_rps  # type: ignore[arg-type]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per service (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per service; the best counts (default 3)")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    args = parser.parse_args(argv)
    rows = run(args.requests, args.rounds)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'service':<30}{'requests':>10}{'req/s':>12}{'mean rtt ms':>14}{'vs baseline':>13}")
    for row in rows:
        print(f"{row['name']:<30}{row['requests']:>10}{row['rps']:>12.0f}{row['rtt_ms']:>14.3f}{row['ratio']:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
