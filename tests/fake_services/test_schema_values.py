"""``schema_values.value_for``: valid, deterministic, readable values for the schemas tools and response
formats use, and hypothesis-jsonschema's simplest value where the readable generator cannot go."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from killpoint.fake_services.schema_values import NoValue, satisfies, value_for


class Line(BaseModel):
    sku: str
    quantity: int


class Invoice(BaseModel):
    number: str
    status: Literal["open", "paid"]
    lines: list[Line]
    note: str | None = None
    total: float


SCHEMAS = [
    Invoice.model_json_schema(),
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                      "to": {"type": "string", "format": "email"},
                                      "n": {"type": "integer", "exclusiveMinimum": 5, "maximum": 6}},
     "required": ["when", "to", "n"], "additionalProperties": False},
    {"type": "object", "properties": {"order": {"type": "string", "pattern": "^A-[0-9]+$"}}, "required": ["order"]},
    {"type": "object", "properties": {"x": {"not": {"type": "string"}}}, "required": ["x"]},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 2},
    {"type": ["string", "null"], "minLength": 12, "maxLength": 12},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_value_satisfies_the_schema_and_depends_only_on_schema_and_seed(schema):
    value = value_for(schema, "seed-1")
    assert satisfies(value, schema)
    assert value_for(schema, "seed-1") == value


def test_values_are_readable_and_vary_with_the_seed():
    values = [value_for(Invoice.model_json_schema(), f"seed-{i}") for i in range(5)]
    assert len({v["number"] for v in values}) > 1
    assert all(v["number"].isprintable() and v["number"].isascii() for v in values)


def test_an_unsatisfiable_schema_is_no_value():
    with pytest.raises(NoValue):
        value_for({"type": "integer", "minimum": 5, "maximum": 1}, "s")
