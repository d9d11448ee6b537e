"""Code for a test's child script: every pydantic schema the process builds from here on, in `built`."""

COUNT_SCHEMAS = r"""
from pydantic._internal import _generate_schema
built = []
_original_generate_schema = _generate_schema.GenerateSchema.generate_schema
def _counted(self, obj, *args, **kwargs):
    built.append(repr(obj)[:80])
    return _original_generate_schema(self, obj, *args, **kwargs)
_generate_schema.GenerateSchema.generate_schema = _counted
"""
"""Counts in `built` (the first 80 characters of what each schema is for) every schema built after it runs."""
