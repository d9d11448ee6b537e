"""A JSON value that satisfies a JSON schema, chosen deterministically from a seed: the arguments of the
fake model's tool calls and its structured output.

Contract: ``value_for(schema, seed)`` is a pure function of (schema, seed): the same pair gives the same
value on every machine and in every process, and the value is valid under the schema (checked with
``jsonschema``); :class:`NoValue` when no value can be found.

1. A readable value first: words, small numbers, dates and e-mail addresses as a model would write
   them, for the subset of JSON Schema that tool and response-format schemas use (``type``, ``properties``,
   ``required``, ``items``, ``enum``, ``const``, ``anyOf`` / ``oneOf``, ``allOf`` of objects, local
   ``$ref`` to ``$defs``, the numeric and length bounds, the common string ``format`` s), varied by the seed.
   A string with a ``pattern`` is hypothesis-jsonschema's simplest match of it (as in step 2).
2. When that value is not valid (``not``, a tight combination), the simplest valid value
   hypothesis-jsonschema generates (its first, derandomized example: deterministic, about 10 ms). Its
   seeded draws were measured to be valid but hostile to an agent (control characters, astral-plane text,
   invented extra properties), and ``hypothesis.find`` took 1 to 10 s per schema, hence step 1; its first
   example is plain.
"""

from __future__ import annotations

import random
import threading
from functools import lru_cache
from typing import Any

from .canon import canonical_json

WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "falcon", "granite", "harbor", "indigo", "juniper",
         "kestrel", "lumen", "meadow", "nectar", "orchid", "pepper", "quartz", "raven", "saffron", "tundra")
MAX_DEPTH = 6
_HYPOTHESIS = threading.Lock()  # hypothesis's engine is not meant to run from several threads at once


class NoValue(ValueError):
    """No value satisfies the schema (or none was found)."""


class Unsupported(Exception):
    """The readable generator does not handle a keyword; the fallback does."""


def value_for(schema: Any, seed: str) -> Any:
    """A value valid under ``schema``, the same for the same (schema, seed) (see the module docstring)."""
    try:
        value = Readable(schema, random.Random(f"{seed}:{canonical_json(schema)}")).make(schema, 0)
    except Unsupported:
        pass
    else:
        if satisfies(value, schema):
            return value
    return _simplest(canonical_json(schema))


def satisfies(value: Any, schema: Any) -> bool:
    """True when ``value`` is valid under ``schema`` (its own ``$schema`` draft, else 2020-12)."""
    import jsonschema

    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return validator(schema, format_checker=validator.FORMAT_CHECKER).is_valid(value)


@lru_cache(maxsize=256)
def _simplest(schema_json: str) -> Any:
    """hypothesis-jsonschema's first example, which is its simplest (derandomized, no shrinking: fast)."""
    import json

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import HypothesisException
    from hypothesis_jsonschema import from_schema

    schema = json.loads(schema_json)
    found: list[Any] = []

    @settings(database=None, derandomize=True, max_examples=1, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(from_schema(schema, allow_x00=False))
    def first(value: Any) -> None:
        found.append(value)

    with _HYPOTHESIS:
        try:
            first()
        except (HypothesisException, ValueError) as exc:
            raise NoValue(f"no value satisfies the schema {schema_json[:200]}: {exc}") from None
    if not found:
        raise NoValue(f"no value satisfies the schema {schema_json[:200]}")
    return found[0]


class Readable:
    """The readable generator of step 1: ``make(schema, depth)`` or :class:`Unsupported`."""

    def __init__(self, root: Any, rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    def make(self, schema: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise Unsupported("too deep")
        if schema is True or schema == {}:
            return self.word()
        if not isinstance(schema, dict):
            raise Unsupported("schema false")
        if "$ref" in schema:
            return self.make(self.resolve(schema["$ref"]), depth + 1)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.rng.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [o for o in schema[key] if not (isinstance(o, dict) and o.get("type") == "null")]
                return self.make(self.rng.choice(options or schema[key]), depth + 1)
        if "allOf" in schema:
            return self.make(merged(schema), depth + 1)
        if "not" in schema or "patternProperties" in schema:
            raise Unsupported("not")
        if "pattern" in schema:  # a regular expression's simplest match: hypothesis's
            return _simplest(canonical_json(schema))
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        return getattr(self, f"make_{kind}")(schema, depth)

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise Unsupported(f"remote $ref {ref}")
        node = self.root
        for part in filter(None, ref[1:].split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise Unsupported(f"$ref {ref} not found")
            node = node[part]
        return node

    def word(self) -> str:
        return f"{self.rng.choice(WORDS)}-{self.rng.randint(1, 99)}"

    def make_object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        return {name: self.make(sub, depth + 1) for name, sub in properties.items()}

    def make_array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        if "prefixItems" in schema:
            raise Unsupported("prefixItems")
        low, high = schema.get("minItems", 1), schema.get("maxItems", 3)
        count = min(max(low, 1), high) if high >= low else low
        return [self.make(schema.get("items", {}), depth + 1) for _ in range(count)]

    def make_string(self, schema: dict[str, Any], depth: int) -> str:
        text = self.formatted(schema.get("format")) or self.word()
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if len(text) < low:
            text += "x" * (low - len(text))
        return text[:high] if high is not None else text

    def formatted(self, fmt: Any) -> str | None:
        day = f"2025-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d}"
        clock = f"{self.rng.randint(0, 23):02d}:{self.rng.randint(0, 59):02d}:00"
        return {
            "date-time": f"{day}T{clock}Z", "date": day, "time": f"{clock}Z",
            "email": f"{self.rng.choice(WORDS)}@example.com", "uri": f"https://example.com/{self.rng.choice(WORDS)}",
            "url": f"https://example.com/{self.rng.choice(WORDS)}", "hostname": f"{self.rng.choice(WORDS)}.example.com",
            "uuid": "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}".format(*(self.rng.getrandbits(b) for b in (32, 16, 12, 12, 48))),
            "ipv4": f"192.0.2.{self.rng.randint(1, 254)}",
        }.get(fmt) if isinstance(fmt, str) else None

    def bounds(self, schema: dict[str, Any], step: float) -> tuple[float, float]:
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0) + step if "exclusiveMinimum" in schema else 1)
        high = schema.get("maximum", schema.get("exclusiveMaximum", 0) - step if "exclusiveMaximum" in schema else None)
        if high is None:
            high = max(low, 0) + 100
        if high < low:
            raise Unsupported("empty range")
        return low, high

    def make_integer(self, schema: dict[str, Any], depth: int) -> int:
        low, high = self.bounds(schema, 1)
        value = self.rng.randint(int(-(-low // 1)), int(high // 1))
        multiple = schema.get("multipleOf")
        return value - value % multiple if isinstance(multiple, int) and multiple > 0 else value

    def make_number(self, schema: dict[str, Any], depth: int) -> float:
        low, high = self.bounds(schema, 0.01)
        return round(self.rng.uniform(low, high), 2)

    def make_boolean(self, schema: dict[str, Any], depth: int) -> bool:
        return self.rng.random() < 0.5

    def make_null(self, schema: dict[str, Any], depth: int) -> None:
        return None


def merged(schema: dict[str, Any]) -> dict[str, Any]:
    """``allOf`` of object schemas as one schema (properties and required joined); Unsupported otherwise."""
    out: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        if not isinstance(part, dict) or set(part) - {"type", "properties", "required", "additionalProperties"}:
            raise Unsupported("allOf of non-object schemas")
        out["properties"] = {**out.get("properties", {}), **part.get("properties", {})}
        out["required"] = [*out.get("required", []), *part.get("required", [])]
        out.setdefault("type", part.get("type", "object"))
    return out
