"""``python -m killpoint.fake_services NAME [--port N] [--host H]``: one fake, standalone.

NAME is one of mailer (which also serves the webhook), ledger, model (Anthropic), stripe, resend, openai.

Prints ``fake NAME listening on http://HOST:PORT`` and serves until SIGTERM or SIGINT, then exits 0.
A port already in use is one line on stderr and exit 2. The admin interface is at ``/_admin/``.
The model fakes answer by the script ``KILLPOINT_MODEL_SCRIPT`` names (``script.py``), then the cassette
``KILLPOINT_MODEL_CASSETTE`` names (``cassette.py``); one that cannot be read is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import threading
from types import FrameType

from .cassette import CassetteError
from .script import ScriptError
from .server import POLL_SECONDS
from .services import SERVERS, build_server
from .state import State


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m killpoint.fake_services", description=__doc__.splitlines()[0])
    parser.add_argument("service", choices=list(SERVERS), help="which fake (the mailer also serves the webhook)")
    parser.add_argument("--port", type=int, default=0, help="TCP port (default 0: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    args = parser.parse_args(argv)
    try:
        state = State()
    except (ScriptError, CassetteError) as exc:
        print(f"fake {args.service}: {exc}", file=sys.stderr)
        return 2
    try:
        server = build_server(args.service, state, args.host, args.port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            print(f"fake {args.service}: port {args.port} on {args.host} is already in use; "
                  f"pass another --port N, or --port 0 for a free one", file=sys.stderr)
        else:
            print(f"fake {args.service}: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2

    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"fake {args.service} listening on {server.base_url}", flush=True)
    try:
        server.serve_forever(POLL_SECONDS)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
