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
    CorpusAgent("model_loop", "a step visited three times, asking the model on each pass"),
    CorpusAgent("reread_receipt", "a deduplicated re-read with no fault (the email step re-sends the charge)"),
    CorpusAgent("batch_email", "several effects in one request (a Resend batch of two emails)"),
    CorpusAgent("uuid5_keys", "keys that are UUIDv5 of the run and the step (opaque, stable)"),
    CorpusAgent("minted_key", "a random key minted once and checkpointed before use"),
    CorpusAgent("no_model", "an agent that never calls the model"),
    CorpusAgent("timestamp_prompt", "the current time in a prompt"),
    CorpusAgent("streaming", "streaming model calls (server-sent events)"),
    CorpusAgent("extra_checkpoints", "a checkpoint more often than once per effect (bookkeeping steps)"),
    CorpusAgent("idle_step", "a step that does nothing on this invoice (no effect, no model call)"),
    CorpusAgent("parallel_tools", "parallel tool calls run from two threads, each keyed by its tool_use id"),
    CorpusAgent("own_retries", "a step that retries on its own with the same key"),
    CorpusAgent("one_step", "the whole tool loop (model, tool, model) in one step, as a framework's runner"),
)
