"""The admin interface, over HTTP (on every fake's port) and from Python (:class:`AdminClient`).

HTTP routes (JSON in, JSON out):

=====  ===============================  ==========================================================
GET    ``/_admin/health``               ``{"ok": true, "service": NAME}``
GET    ``/_admin/attempts?run=ID``      the attempts, of one run or (without ``run``) of all runs
GET    ``/_admin/effects?run=ID``       the applied effects
GET    ``/_admin/model_requests?run=ID`` the model requests
GET    ``/_admin/faults``               the static faults as they stand (see ``faults.py``)
POST   ``/_admin/faults``               set static faults (body: the fault object); answers as GET
POST   ``/_admin/reset?run=ID``         forget one run, or (without ``run``) everything and the faults
POST   ``/_admin/accounts``             ``{"account": NAME, "runs": [ID, ...]}``: bill those runs in one
                                        provider account (one idempotency key space per service)
=====  ===============================  ==========================================================

Servers started together share one state, so any of their admin interfaces shows all services.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from .wire import Reply, error_body

if TYPE_CHECKING:
    from .state import State

PREFIX = "/_admin/"
_LISTS = ("attempts", "effects", "model_requests")


def reply(state: State, service: str, method: str, path: str, query: dict[str, str], body: bytes) -> Reply:
    """Answer one admin request."""
    name = path[len(PREFIX):].rstrip("/")
    run_id = query.get("run") or None
    if method == "GET" and name == "health":
        return Reply.json(200, {"ok": True, "service": service})
    if method == "GET" and name in _LISTS:
        return Reply.json(200, getattr(state.journal, name)(run_id))
    if method == "GET" and name == "faults":
        return Reply.json(200, state.faults.snapshot())
    if method == "POST" and name == "faults":
        try:
            state.faults.set(json.loads(body or b"{}"))
        except (ValueError, UnicodeDecodeError) as exc:
            return Reply.json(400, error_body("invalid_faults", str(exc)))
        return Reply.json(200, state.faults.snapshot())
    if method == "POST" and name == "accounts":
        try:
            body_value = json.loads(body or b"{}")
            account, runs = body_value["account"], body_value["runs"]
            if not isinstance(account, str) or not isinstance(runs, list) or not all(isinstance(r, str) for r in runs):
                raise ValueError("'account' must be a string and 'runs' a list of run ids")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            return Reply.json(400, error_body("invalid_accounts", f"expected {{\"account\", \"runs\"}}: {exc}"))
        state.journal.share_account(account, runs)
        return Reply.json(200, {"ok": True})
    if method == "POST" and name == "reset":
        reset(state, run_id)
        return Reply.json(200, {"ok": True})
    return Reply.json(404, error_body("not_found", f"no admin route {method} {path}"))


def reset(state: State, run_id: str | None = None) -> None:
    """Forget one run's records; or all records, the arrival counter and the static faults."""
    state.journal.reset(run_id)
    state.sampling.forget(run_id)
    if run_id is None:
        state.faults.clear()


class AdminClient:
    """The HTTP admin interface from Python, for fakes running standalone (``python -m killpoint.fake_services``).

    ``base_url`` is the server's root, e.g. ``http://127.0.0.1:8025``. Errors raise ``RuntimeError``
    with the server's message.
    """

    def __init__(self, base_url: str, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, name: str, run_id: str | None = None, body: Any = None) -> Any:
        url = f"{self.base_url}{PREFIX}{name}"
        if run_id is not None:
            url += "?" + urlencode({"run": run_id})
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {url}: {exc.code} {exc.read().decode('utf-8', 'replace')}") from None

    def health(self) -> dict[str, Any]:
        return self._call("GET", "health")

    def attempts(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "attempts", run_id)

    def effects(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "effects", run_id)

    def model_requests(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "model_requests", run_id)

    def faults(self) -> dict[str, dict[str, int]]:
        return self._call("GET", "faults")

    def set_faults(self, faults: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        return self._call("POST", "faults", body=faults)

    def reset(self, run_id: str | None = None) -> None:
        self._call("POST", "reset", run_id, body={})

    def share_account(self, account: str, run_ids: list[str]) -> None:
        self._call("POST", "accounts", body={"account": account, "runs": list(run_ids)})
