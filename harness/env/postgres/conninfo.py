"""Session settings in a DSN: killpoint's ``-c`` settings merged into the ``options`` the user gave.

libpq takes a session's settings from the DSN's ``options`` parameter, else from ``PGOPTIONS``, never
both; and its ``application_name`` from the DSN, else from ``PGAPPNAME``. So as soon as a DSN carries
``options=`` (every ``--dsn`` session's does: its ``search_path``) or ``application_name=``, what killpoint
puts in the environment of a worker is ignored. Instead the settings go into the DSN itself:

1. ``with_settings(dsn, settings)`` sets each ``-c name=value`` of ``settings`` in the DSN's options,
   replacing a setting of the same name and keeping every other option the user gave (``-c
   statement_timeout=...``, any other flag), in the URL and the ``key=value`` form.
2. A ``search_path`` of the user's is replaced like any other setting, never joined to killpoint's: a
   session's names resolve in its own schema alone, so none can fall through to the user's tables.
3. ``for_worker(dsn, inc)`` is the DSN a worker incarnation gets: if the DSN carries ``options``, the
   incarnation's ``killpoint.inc`` is merged into them (else ``PGOPTIONS`` carries it); if it carries
   ``application_name``, that becomes the incarnation's id (else ``PGAPPNAME`` does it). A DSN with neither
   is returned unchanged.
4. ``standby_env(env, name)`` is the environment of a session opened ahead for an incarnation not yet
   named (the fork server's standby): every place point 3 (and ``PGAPPNAME``/``PGOPTIONS``) names the
   incarnation names ``name`` instead, all else is the incarnation's. ``identity(env)`` is what the
   incarnation's own environment would have set at connect time (``application_name``, ``killpoint.inc``),
   for ``set_config`` on that session when it is handed over: then it reads as if the incarnation had
   opened it (``current_setting``, ``pg_stat_activity.application_name``).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit


def escape(value: str) -> str:
    """``value`` as one token of a libpq options string (backslash and whitespace escaped)."""
    return value.replace("\\", "\\\\").replace(" ", "\\ ").replace("\t", "\\\t")


def tokens(options: str) -> list[str]:
    """``options`` split on unescaped whitespace; escapes are kept in the tokens (they are written back)."""
    out: list[str] = []
    cur: list[str] = []
    chars = iter(options)
    for ch in chars:
        if ch == "\\":
            cur.append(ch + next(chars, ""))
        elif ch.isspace():
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def parse(options: str) -> list[tuple[str | None, str]]:
    """``options`` as ``(name, raw value)`` for each setting (``-c a=b``, ``-ca=b``, ``--a=b``) and ``(None,
    token)`` for any other token, in order."""
    out: list[tuple[str | None, str]] = []
    toks = tokens(options)
    i = 0
    while i < len(toks):
        tok = toks[i]
        body = None
        if tok == "-c" and i + 1 < len(toks):
            body, i = toks[i + 1], i + 1
        elif tok.startswith("-c") and len(tok) > 2:
            body = tok[2:]
        elif tok.startswith("--") and "=" in tok:
            body = tok[2:]
        if body is not None and "=" in body:
            name, value = body.split("=", 1)
            out.append((name.strip().lower().replace("-", "_"), value))
        else:
            out.append((None, tok))
        i += 1
    return out


def merge(options: str, settings: Mapping[str, str]) -> str:
    """``options`` with each of ``settings`` (name -> plain value) set, replacing the user's setting of the
    same name; all else is kept in order."""
    items = parse(options)
    out: list[str] = []
    mine = {k.lower(): escape(v) for k, v in settings.items()}
    for name, raw in items:
        if name is None:
            out.append(raw)
        elif name in mine:
            continue
        else:
            out.append(f"-c {name}={raw}")
    out.extend(f"-c {name}={value}" for name, value in mine.items())
    return " ".join(out)


def get(dsn: str, key: str) -> str | None:
    """The value of parameter ``key`` in ``dsn`` (URL or ``key=value``), or ``None`` if it has none."""
    return _get(dsn, key)


def with_options(dsn: str, options: str) -> str:
    """``dsn`` whose ``options`` parameter is ``options`` (any it had replaced)."""
    return _set(dsn, options=options)


def _get(dsn: str, key: str) -> str | None:
    if "://" not in dsn:
        from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415

        value = conninfo_to_dict(dsn).get(key)
        return None if value is None else str(value)
    values = [v for k, v in parse_qsl(urlsplit(dsn).query, keep_blank_values=True) if k == key]
    return " ".join(values) if values else None


def _set(dsn: str, **params: str) -> str:
    if "://" not in dsn:
        from psycopg.conninfo import make_conninfo  # noqa: PLC0415

        return make_conninfo(dsn, **params)
    parts = urlsplit(dsn)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in params]
    query += list(params.items())
    # %20, not `+`: libpq decodes only %XX escapes in a URL
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query, quote_via=quote), parts.fragment))


def with_settings(dsn: str, settings: Mapping[str, str]) -> str:
    """``dsn`` (URL or ``key=value``) whose ``options`` set ``settings`` (see ``merge``)."""
    return _set(dsn, options=merge(_get(dsn, "options") or "", settings))


def for_worker(dsn: str, inc: str) -> str:
    """The DSN a worker incarnation ``inc`` gets (see the module docstring, point 3)."""
    params: dict[str, str] = {}
    if _get(dsn, "options") is not None:
        params["options"] = merge(_get(dsn, "options") or "", {"killpoint.inc": inc})
    if _get(dsn, "application_name") is not None:
        params["application_name"] = inc
    return _set(dsn, **params) if params else dsn


INC_SETTING = "killpoint.inc"
"""The session setting naming the writing incarnation (read by the audit trail, killpoint/env/audit.py)."""


def standby_env(env: Mapping[str, str], name: str) -> dict[str, str]:
    """``env`` (an incarnation's) with the incarnation's name replaced by ``name`` wherever libpq reads it
    (see the module docstring, point 4)."""
    out = dict(env)
    if out.get("DATABASE_URL"):
        out["DATABASE_URL"] = for_worker(out["DATABASE_URL"], name)
    if "PGAPPNAME" in out:
        out["PGAPPNAME"] = name
    if out.get("PGOPTIONS") and any(n == INC_SETTING for n, _ in parse(out["PGOPTIONS"])):
        out["PGOPTIONS"] = merge(out["PGOPTIONS"], {INC_SETTING: name})
    return out


def identity(env: Mapping[str, str]) -> dict[str, str]:
    """The settings naming the incarnation that a session opened with ``env`` gets at connect time:
    ``application_name`` (the DSN's, else ``PGAPPNAME``) and ``killpoint.inc`` (from the DSN's options,
    else ``PGOPTIONS``: libpq reads the latter only when the DSN has none), each only if set."""
    dsn = env.get("DATABASE_URL") or ""
    out: dict[str, str] = {}
    app = _get(dsn, "application_name") if dsn else None
    if app is None:
        app = env.get("PGAPPNAME")
    if app is not None:
        out["application_name"] = app
    options = _get(dsn, "options") if dsn else None
    if options is None:
        options = env.get("PGOPTIONS")
    for n, raw in parse(options or ""):
        if n == INC_SETTING:
            out[INC_SETTING] = unescape(raw)
    return out


def unescape(token: str) -> str:
    """The plain value of one options token (the inverse of ``escape``)."""
    out: list[str] = []
    chars = iter(token)
    for ch in chars:
        out.append(next(chars, "") if ch == "\\" else ch)
    return "".join(out)
