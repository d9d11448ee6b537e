"""A corpus of correct agents written in unusual ways, one step module each (`--steps tests.corpus.<name>`).

Every one is correct: whatever the faults, each effect is done once and the run ends as the crash-free one
does. Each is written a way the reference agent is not (a loop, a re-read, a batched request, ...), to
show that killpoint's checkers judge the property, not the reference agent's habits: a FAIL on any of them
is a false verdict (tests/checkers/test_corpus.py; the long exploration is bench/corpus.py).
"""

from __future__ import annotations

from dataclasses import dataclass

PACKAGE = "tests.corpus"


@dataclass(frozen=True)
class CorpusAgent:
    """One corpus agent: its module name and the unusual shape it is written in."""

    name: str
    shape: str

    @property
    def module(self) -> str:
        return f"{PACKAGE}.{self.name}"


AGENTS: tuple[CorpusAgent, ...] = (
    CorpusAgent("installments", "a step visited twice (a loop: two installments keyed <run>:charge:<n>)"),
)
