"""A gallery of mutant agents: the reference agent with exactly one of the mistakes the two articles warn
about, each in its own module (a step module for `--steps tests.gallery.mutants.<name>`).

A step-module mutant changes a step; a runtime mutant re-exports the reference invoice agent and, at import
time, replaces one piece of the reference runtime with a broken one. The fork server and an exec'd worker
both import the step module before the worker runs, so the mutation is in force in every incarnation.
Each module's docstring and a ``# BUG:`` comment name its mistake.

This package's ``__init__`` imports none of the mutants (importing one applies its mutation): it is only
the catalog the tests and ``bench/detection.py`` read. For each mutant it records the scenario that
exercises it, one minimal schedule that catches it, and the checker expected to flag it. The harness is
never told about mutants: detection comes from its general property checkers.
"""

from __future__ import annotations

from dataclasses import dataclass

PACKAGE = "tests.gallery.mutants"
"""The dotted path the harness imports mutants by (the repository root on the path), as the tests and
``bench/detection.py`` import this catalog."""


@dataclass(frozen=True)
class Mutant:
    """One mutant: its module name, its bug, and how the harness is expected to catch it."""

    name: str
    bug: str
    scenario: str
    schedule: str
    checker: str
    args: tuple[str, ...] = ()
    """Further arguments of the scenario the catching trial needs (e.g. a grace period)."""
    control: str | None = None
    """The correct agent the same trial must pass (default: the reference agent), where the schedule faults
    what only the mutant's shape reaches (a loop's later pass, `@2`)."""

    @property
    def module(self) -> str:
        return f"{PACKAGE}.{self.name}"

    def replay_args(self, steps: str | None = None) -> list[str]:
        """`killpoint replay` arguments of the catching trial, for this mutant (or for `steps`)."""
        what = ["--schedule", self.schedule] if self.schedule else []
        return ["replay", "--scenario", self.scenario, *what, *self.args, "--steps", steps or self.module]


MUTANTS: tuple[Mutant, ...] = (
    Mutant("seq_key", "idempotency key built from seq, in a runtime that checkpoints when it claims a run",
           "crash-points", "charge:effect.responded:kill", "exactly_once"),
    Mutant("no_key", "no idempotency key at all", "crash-points", "charge:effect.applied:kill", "exactly_once"),
    Mutant("no_guard", "the checkpoint upsert without the monotonic guard (a zombie rewinds the run)",
           "zombie-worker", "email:step.start:stop", "no_rewind"),
    Mutant("no_lease", "no lease (two workers work one run)", "zombie-worker", "charge:checkpoint.committed:stop",
           "bounded_rework"),
    Mutant("checkpoint_before_effect", "checkpoint written before the effect (a crash loses the effect)",
           "crash-points", "charge:checkpoint.committed:kill", "exactly_once"),
    Mutant("two_effects", "two externally visible effects in one step", "crash-points",
           "charge:checkpoint.writing:kill", "bounded_rework"),
    Mutant("window_rebuilt", "the window rebuilt from state instead of saved", "crash-points",
           "validate:step.start:kill", "context_fidelity"),
    Mutant("no_version_check", "no version check (a newer checkpoint is resumed with fields missing)",
           "rollback-refusal", "", "refuses_newer_version", ("--seed", "0")),
    Mutant("missing_migration", "a missing migration defaults a boolean to False and re-does an approved step",
           "schema-upgrade", "validate:step.start:term", "context_fidelity",
           ("--previous-steps", f"{PACKAGE}.invoice_agent_v1")),
    Mutant("exit_on_sigterm", "a SIGTERM handler that exits at once without draining", "crash-points",
           "charge:step.start:term", "drains_on_sigterm"),
    Mutant("drain_over_grace", "a drain deadline longer than the grace period (the handler is decorative)",
           "deploy-drain", "charge:step.start:term", "drains_on_sigterm", ("--grace", "0.7")),
    Mutant("sweeper_no_dedupe", "a sweeper without the dedupe job id", "stalled-sweep",
           "charge:checkpoint.committed:kill", "resumed_once"),
    Mutant("resume_id_per_sweep", "a resume job id unique per sweep, so ON CONFLICT never dedupes", "stalled-sweep",
           "charge:checkpoint.committed:kill", "resumed_once"),
    Mutant("resume_upserted", "a resume job upserted (DO UPDATE), so every sweep that finds the run queues it",
           "stalled-sweep", "charge:checkpoint.committed:kill", "resumed_once"),
    Mutant("torn_checkpoint", "a checkpoint saved in two statements outside one transaction", "crash-points",
           "record:checkpoint.writing:kill", "completes"),
    Mutant("cost_on_replay", "cost added again on replay", "crash-points", "validate:checkpoint.writing:kill",
           "cost_accounted"),
    Mutant("misprices", "every model call mispriced (input and output prices swapped), in every run",
           "crash-points", "plan:step.start:kill", "cost_accounted"),
    Mutant("unjoined_thread", "an effect sent from a thread the step does not join (lost on a 5xx and a kill)",
           "mixed-faults", "email:effect.received:error,record:step.start:kill", "exactly_once"),
    Mutant("hash_key", "idempotency key built with Python's hash() (salted per interpreter)", "crash-points",
           "charge:effect.applied:kill", "exactly_once"),
    Mutant("installment_step_key", "a loop's two installments keyed by the step's key (the same on both visits)",
           "crash-points", "plan:step.start:kill", "exactly_once"),
    Mutant("installment_amount_key", "a loop's installments keyed by their amount (equal installments collide)",
           "crash-points", "plan:step.start:kill", "exactly_once"),
    Mutant("installment_day_key", "a loop's installments keyed by the day (two on one day collide)",
           "crash-points", "plan:step.start:kill", "exactly_once"),
    Mutant("installment_receipt", "a loop's later installments also mail a receipt under a fresh key",
           "crash-points", "charge:checkpoint.writing:kill@2", "exactly_once", control="tests.corpus.installments"),
    Mutant("opinion_webhook", "a loop's later passes post to a keyless webhook", "crash-points",
           "review:checkpoint.writing:kill@2", "exactly_once", control="tests.corpus.model_loop"),
    Mutant("billing_period_key", "the charge key carries the billing period read from the clock on each attempt",
           "mixed-faults", "charge:checkpoint.writing:clock+366d", "exactly_once"),
    Mutant("hour_window_key", "the email key carries the hour the attempt runs in (a dedupe window on the hour)",
           "mixed-faults", "email:checkpoint.writing:clock-1h", "exactly_once"),
    Mutant("period_in_payload", "the email body names the period read from the clock on each attempt",
           "mixed-faults", "email:checkpoint.writing:clock+366d", "completes"),
    Mutant("swallow_send", "the charge's send wrapped in except Exception, and the run carries on",
           "mixed-faults", "charge:effect.received:outage", "exactly_once"),
    Mutant("fallback_marks_sent", "the email recorded as sent after the client gave up", "mixed-faults",
           "email:effect.received:outage", "exactly_once"),
    Mutant("model_fallback", "a model outage taken as an approval", "mixed-faults",
           "validate:model.request:outage", "same_final_state"),
    Mutant("account_key", "the charge keyed on the customer's account: next month's invoice is replayed",
           "shared-account", "charge:effect.applied:kill", "exactly_once"),
    Mutant("amount_key", "the charge keyed on account and amount: two equal invoices are one charge",
           "shared-account", "charge:effect.applied:kill", "exactly_once"),
    Mutant("customer_email_key", "the email keyed on its recipient: next month's invoice mail is refused 422",
           "shared-account", "charge:effect.applied:kill", "completes"),
    Mutant("approve_and_charge", "the approval and the charge it gates in one step (a resumed step hears another "
           "verdict)", "sampling-model", "validate:checkpoint.writing:kill", "decisions_hold"),
    Mutant("decide_and_notify", "the validation mailed to the customer in the step that asks for it",
           "sampling-model", "validate:checkpoint.writing:kill", "decisions_hold"),
    Mutant("model_discount", "a discount the model decides charged in the same step", "sampling-model",
           "charge:effect.applied:kill", "decisions_hold"),
    Mutant("balance_outside_txn", "a balance read outside the checkpoint transaction and written back later",
           "concurrent-runs", "", "same_as_serial", ("--seed", "0")),
    Mutant("receipt_memo", "a per-process memo of receipts shared by the runs one worker serves",
           "concurrent-runs", "", "invariants_hold", ("--seed", "0")),
    Mutant("number_outside_txn", "invoice numbers drawn outside the checkpoint transaction", "concurrent-runs", "",
           "same_as_serial", ("--seed", "0")),
)
"""Every mutant. ``schedule`` is empty where the scenario's own seeded trial (``--seed`` in ``args``), not a
fault, exercises the bug."""

PREVIOUS_CODE = {f"{PACKAGE}.invoice_agent_v1"}
"""Modules here that are not mutants: the agent's previous code, for the schema-upgrade scenario."""

BY_NAME: dict[str, Mutant] = {m.name: m for m in MUTANTS}
