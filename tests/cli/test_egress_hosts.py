"""`--allow-egress HOST` (harness/cli/validate.py `egress_host`) takes what the egress guard matches: a host
name or an address, exactly, on any port (harness/env/egress.py). A URL, a path, a port or a pattern would
match no host the worker connects to, so the worker would be refused at run time with the option looking
right: they are refused as the line is parsed, naming the host to give. What the guard matches is accepted,
lowercased (it compares case-insensitively)."""

from __future__ import annotations

import pytest

from killpoint.cli.validate import egress_host
from killpoint.env import egress
from killpoint.errors import UsageError


@pytest.mark.parametrize(("text", "says", "fix"), [
    ("https://api.stripe.com/v1", "is a URL", "--allow-egress api.stripe.com"),
    ("api.stripe.com/v1", "holds a path", "--allow-egress api.stripe.com"),
    ("api.stripe.com:443", "names a port", "--allow-egress api.stripe.com"),
    ("*.stripe.com", "is a pattern", "'*'"),
    ("api.stripe.com,*", "is a pattern", "'*'"),
    ("", "empty host", "--allow-egress api.example.com"),
    ("api..stripe.com", "is not a host name or an address", "--allow-egress api.example.com"),
    ("api stripe.com", "is not a host name or an address", "--allow-egress api.example.com"),
    ("-bad.example.com", "is not a host name or an address", "--allow-egress api.example.com"),
], ids=["url", "path", "port", "pattern", "pattern-in-a-list", "empty", "empty-label", "space", "leading-dash"])
def test_what_the_guard_could_never_match_is_refused_naming_the_host_to_give(text: str, says: str, fix: str) -> None:
    with pytest.raises(UsageError) as caught:
        egress_host(text)
    assert caught.value.code == "bad-allow-egress"
    assert says in caught.value.message and fix in caught.value.fix, caught.value.line()
    assert "\n" not in caught.value.line()


@pytest.mark.parametrize(("text", "kept"), [
    ("api.stripe.com", "api.stripe.com"),
    ("API.Stripe.COM.", "api.stripe.com"),
    ("db_1.internal", "db_1.internal"),
    ("10.0.0.7", "10.0.0.7"),
    ("2001:db8::1", "2001:db8::1"),
    ("[2001:db8::1]", "2001:db8::1"),
    ("api.stripe.com, api.openai.com", "api.stripe.com,api.openai.com"),
    ("*", "*"),
], ids=["name", "case-and-final-dot", "underscore", "ipv4", "ipv6", "ipv6-bracketed", "a-list", "any"])
def test_what_the_guard_matches_is_accepted_as_it_matches_it(text: str, kept: str) -> None:
    assert egress_host(text) == kept


def test_an_accepted_host_is_one_the_guard_lets_through() -> None:
    """What `egress_host` keeps is what `egress.is_allowed` compares against: the host as a worker names it."""
    kept = egress_host("API.Example.COM")
    saved = egress._allowed, egress._allowed_ips
    try:
        egress._allowed, egress._allowed_ips = frozenset(kept.split(",")), set()
        assert egress.is_allowed("api.example.com") and egress.is_allowed("API.EXAMPLE.COM")
        assert not egress.is_allowed("other.example.com")
    finally:
        egress._allowed, egress._allowed_ips = saved
