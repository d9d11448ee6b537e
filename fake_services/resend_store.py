"""What the fake Resend holds for a run: its emails and contacts as they stand, read from the journal.

Contract: a run's state is a fold over its Resend effects in arrival order, each taken with the path of
the attempt that applied it (an update names its object in the path, not in the body):

- ``POST /emails`` and each email of ``POST /emails/batch``: an email (``last_event`` ``delivered``, or
  ``scheduled`` with a ``scheduled_at``); ``POST /emails/{id}/cancel``: it is ``canceled``;
  ``PATCH /emails/{id}``: its ``scheduled_at`` is the one given;
- ``POST /contacts`` (or ``/audiences/{audience}/contacts``): a contact; ``PATCH /contacts/{id or email}``:
  the fields given replace its own; ``DELETE``: it is gone.

Nothing else is kept, so a run's reset forgets it and a deduplicated retry changes nothing. Emails and
contacts are listed newest first.
"""

from __future__ import annotations

from typing import Any

SERVICE = "resend"
CREATED_AT = "2025-01-01 00:00:00.000000+00"
CONTACT_FIELDS = ("email", "first_name", "last_name", "unsubscribed")


def addresses(value: Any) -> list[str] | None:
    """``to`` as a list, or None if it is neither a string nor a list of strings."""
    if isinstance(value, str):
        value = [value]
    return value if isinstance(value, list) and all(isinstance(a, str) for a in value) else None


def email_view(email_id: str, sent: dict[str, Any]) -> dict[str, Any]:
    """The email as ``GET /emails/{id}`` shows it."""
    scheduled = sent.get("scheduled_at")
    return {
        "object": "email", "id": email_id, "from": sent["from"], "to": addresses(sent["to"]),
        "subject": sent["subject"], "html": sent.get("html"), "text": sent.get("text"), "cc": sent.get("cc"),
        "bcc": sent.get("bcc"), "reply_to": sent.get("reply_to"), "tags": sent.get("tags"),
        "created_at": CREATED_AT, "scheduled_at": scheduled, "last_event": "scheduled" if scheduled else "delivered",
    }


def contact_view(contact_id: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"object": "contact", "id": contact_id, "email": params["email"],
            "first_name": params.get("first_name"), "last_name": params.get("last_name"),
            "created_at": CREATED_AT, "unsubscribed": bool(params.get("unsubscribed", False))}


class Store:
    """A run's emails and contacts (see the module docstring)."""

    def __init__(self, effects: list[dict[str, Any]], paths: dict[int, str]) -> None:
        self.emails: dict[str, dict[str, Any]] = {}
        self.contacts: dict[str, dict[str, Any]] = {}
        for effect in effects:
            self._apply(paths.get(effect["attempt"], ""), effect)

    @classmethod
    def of(cls, journal: Any, run_id: str) -> Store:
        paths = {a["order"]: a["path"] for a in journal.attempts(run_id) if a["service"] == SERVICE}
        return cls(journal.effects_of(SERVICE, run_id), paths)

    def _apply(self, path: str, effect: dict[str, Any]) -> None:
        parts = path.strip("/").split("/")
        body = effect["payload"] if isinstance(effect["payload"], dict) else {}
        if parts[0] == "emails":
            if len(parts) == 1 or parts[1] == "batch":
                self.emails[effect["id"]] = email_view(effect["id"], body)
            elif len(parts) == 3 and parts[1] in self.emails:  # cancel
                self.emails[parts[1]] = {**self.emails[parts[1]], "last_event": "canceled"}
            elif parts[1] in self.emails:  # update
                self.emails[parts[1]] = {**self.emails[parts[1]], "scheduled_at": body.get("scheduled_at")}
        elif "contacts" in parts:
            rest = parts[parts.index("contacts") + 1:]
            if not rest:
                self.contacts[effect["id"]] = contact_view(effect["id"], body)
                return
            found = self.contact(rest[0])
            if found is None:
                return
            if effect["response"].get("deleted"):
                del self.contacts[found["id"]]
            else:
                changes = {k: body[k] for k in CONTACT_FIELDS if k in body and k != "email"}
                self.contacts[found["id"]] = {**found, **changes}

    def contact(self, id_or_email: str) -> dict[str, Any] | None:
        """The contact with that id or email, or None."""
        if id_or_email in self.contacts:
            return self.contacts[id_or_email]
        return next((c for c in self.contacts.values() if c["email"] == id_or_email), None)
