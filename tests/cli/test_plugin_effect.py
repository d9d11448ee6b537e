"""`--killpoint-effect NAME=URL[,id=PATH]`: the pytest plugin's `--effect`, read into the session's config (the
declared id path kept, so a replay line repeats it); a bad value is pytest's usage error naming the option."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from killpoint.plugin import session_config


def config(effects: list[str]) -> pytest.Config:
    options = {"--killpoint-effect": effects, "--killpoint-out": "/tmp/killpoint-plugin-effect-test",
               "--killpoint-dsn": None, "--killpoint-postgres": "auto", "--killpoint-spawn": "fork",
               "--killpoint-jobs": 1}
    return SimpleNamespace(getoption=options.__getitem__, rootpath=Path("."),  # type: ignore[return-value]
                           stash={})  # as pytest_configure leaves it with no --killpoint-worker-cmd


def test_effects_reach_the_session_with_their_id_path() -> None:
    cfg = session_config(config(["tickets=http://127.0.0.1:9/api,id=ticket.id", "sms=http://127.0.0.1:9/sms"]),
                         "tests.gallery.variants.ticket_agent", None)  # type: ignore[arg-type]
    assert dict(cfg.effects) == {"tickets": "http://127.0.0.1:9/api,id=ticket.id", "sms": "http://127.0.0.1:9/sms"}


@pytest.mark.parametrize("value, problem", [("tickets", "NAME=URL"), ("tickets=http://x,sid", "only id=PATH")])
def test_a_bad_effect_is_a_usage_error_naming_the_option(value: str, problem: str) -> None:
    with pytest.raises(pytest.UsageError, match=rf"--killpoint-effect {value}.*{problem}"):
        session_config(config([value]), "tests.gallery.variants.ticket_agent", None)  # type: ignore[arg-type]
