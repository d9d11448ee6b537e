"""What a fork costs from a preloaded interpreter with its heap on 2 MB pages and without, and how many of
those pages a forking parent keeps.

    python bench/huge_pages.py [--n 300] [--child none|work]

Each mode runs in a fresh interpreter of its own (this script again, `--mode`), one after the other:

1. import the SDK and psycopg as a fork server does, make the SDK's client and parse one `Message` (its first
   call's schemas built here, not in every child), then `gc.collect(); gc.freeze()`;
2. `huge`: `procutil.huge_heap()` (what the fork servers do before their first fork); `plain`: nothing;
3. `n` times: fork a child that (`--child work`) parses and dumps one `Message`, or (`none`) does nothing,
   and `os._exit(0)`; the parent waits for it. The children's CPU (`RUSAGE_CHILDREN`) and the parent's
   system CPU over the loop are divided by `n`;
4. the parent's `AnonHugePages` before and after the loop: the huge pages its own writes between forks did
   not split (a write to a huge page a child shares splits it, in the parent as in the child).

Prints each mode's figures and the ratio of the CPU per fork, plain / huge. A benchmark, not a test: it
asserts nothing; the figures depend on the kernel (`MADV_COLLAPSE`: Linux 6.1 or later) and the load.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
           "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "stop_sequence": None,
           "usage": {"input_tokens": 1, "output_tokens": 1}}


def huge_kb() -> int:
    with open("/proc/self/smaps_rollup") as f:
        return int(f.read().split("AnonHugePages:")[1].split()[0])


def measure(mode: str, n: int, child: str) -> None:
    """Flow steps 1-4 in this process; prints one line of figures."""
    import anthropic  # noqa: PLC0415 - the preload being measured
    import psycopg  # noqa: F401, PLC0415
    from anthropic.types import Message  # noqa: PLC0415

    from killpoint.env.procutil import huge_heap  # noqa: PLC0415

    anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9").close()
    Message.model_validate(MESSAGE).model_dump_json()
    gc.collect()
    gc.freeze()
    collapsed = huge_heap() if mode == "huge" else 0
    before = huge_kb()
    kids0, self0 = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            if child == "work":
                Message.model_validate(MESSAGE).model_dump_json()
            os._exit(0)
        os.waitpid(pid, 0)
    kids1, self1 = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    per = {"child_user": (kids1.ru_utime - kids0.ru_utime), "child_sys": (kids1.ru_stime - kids0.ru_stime),
           "parent_sys": (self1.ru_stime - self0.ru_stime)}
    total = sum(per.values()) * 1000 / n
    print(f"{mode:6} collapsed {collapsed >> 20:3d} MB; huge pages {before >> 10:3d} MB before the forks, "
          f"{huge_kb() >> 10:3d} MB after; per fork: child user {per['child_user'] * 1000 / n:.2f} ms, "
          f"child sys {per['child_sys'] * 1000 / n:.2f} ms, parent sys {per['parent_sys'] * 1000 / n:.2f} ms, "
          f"total {total:.2f} ms", flush=True)
    print(f"TOTAL {total}")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--child", choices=("none", "work"), default="none")
    p.add_argument("--mode", choices=("plain", "huge"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mode:
        measure(args.mode, args.n, args.child)
        return 0
    totals = {}
    for mode in ("plain", "huge"):
        out = subprocess.run([sys.executable, __file__, "--mode", mode, "--n", str(args.n), "--child", args.child],
                             capture_output=True, text=True, cwd=ROOT, check=True).stdout
        lines = out.splitlines()
        print(lines[0])
        totals[mode] = float(lines[-1].split()[1])
    print(f"CPU per fork, plain / huge: {totals['plain'] / totals['huge']:.2f}x  "
          f"(load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
