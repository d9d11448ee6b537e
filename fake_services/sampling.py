"""A model that samples: a repeated identical request answered differently, seeded and reproducible.

A real model asked the same thing twice may answer differently ("approve", then "review"). The default
fake is a pure function of the request, so a step resumed after a crash always hears what the first attempt
heard and a decision acted on but never checkpointed goes unseen. Per run, the harness may turn on:

- ``sample(run_id, seed)``: the k-th applied answer (k >= 1, counting from 0) to a request this run already
  had answered is re-drawn: the text ``answer <d[:12]> verdict=<v>`` with ``d`` the digest of
  (request digest, seed, k), and ``v`` the *other* verdict than the previous answer's (the most hostile
  sample: a decision made on the first answer is contradicted by the second). The first answer to each
  request is the pure one, so a run that never repeats a request is answered as the crash-free run was.
- ``pin(run_id, answers)``: request digest -> the text to answer with (a crash-free run that hears the
  answers a sampled run ended with: the counterfactual it is judged against).

Only text answers of the default policy are re-drawn or pinned (no tool calls; a script's or cassette's
answer is the user's, and stays as it is). Pure functions of (request digest, seed, k): the same seed and
the same repeats give the same answers on any machine.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from .canon import text_digest
from .policy import VERDICTS

SAMPLED_PREFIX = "answer "


@dataclass
class Sampling:
    """The runs that sample (run id -> seed) and the pinned answers (run id -> digest -> text)."""

    seeds: dict[str, int] = field(default_factory=dict)
    pins: dict[str, dict[str, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sample(self, run_id: str, seed: int) -> None:
        with self.lock:
            self.seeds[run_id] = seed

    def pin(self, run_id: str, answers: dict[str, str]) -> None:
        with self.lock:
            self.pins[run_id] = dict(answers)

    def forget(self, run_id: str | None = None) -> None:
        with self.lock:
            if run_id is None:
                self.seeds.clear()
                self.pins.clear()
            else:
                self.seeds.pop(run_id, None)
                self.pins.pop(run_id, None)

    def text(self, run_id: str, digest: str, answer_text: str, earlier: list[str]) -> str:
        """The text to answer with: pinned, re-drawn (``earlier``: this run's applied answers to the same
        request, oldest first), or ``answer_text`` itself."""
        with self.lock:
            pinned = self.pins.get(run_id, {}).get(digest)
            seed = self.seeds.get(run_id)
        if pinned is not None:
            return pinned
        if seed is None or not earlier or not answer_text.startswith(SAMPLED_PREFIX):
            return answer_text
        k = len(earlier)
        drawn = text_digest(f"{digest}:{seed}:{k}")
        before = earlier[-1].rsplit("verdict=", 1)[-1]
        others = [v for v in dict.fromkeys(VERDICTS) if v != before] or [before]
        return f"answer {drawn[:12]} verdict={others[int(drawn[12:20], 16) % len(others)]}"


def resampled(answer: Any, text: str) -> Any:
    """``answer`` (a ``model.Answer``) with ``text`` instead of its own (and its output tokens), when they differ."""
    return answer if text == answer.text else replace(answer, text=text, output_tokens=math.ceil(len(text) / 4))
