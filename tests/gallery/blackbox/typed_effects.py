"""CORRECT: the outbox invoice run of ``outbox_marks_sent.py`` whose effects are typed: ``python
typed_effects.py RUN_ID``.

Each effect's body is checked before it is sent by building a dataclass declared in ``main`` (an ``Email`` holding a
``Template``, a ``Charge``), with the small from-dict decoder such workers write: it follows each field's
annotation (``dataclasses.fields(cls)[i].type``) and builds a nested dataclass from a nested dict. That relies
on the annotations being evaluated, as ``python typed_effects.py`` evaluates them: this file has no ``from
__future__ import annotations`` on purpose. A forked incarnation whose script was compiled with the fork
server's own future features (postponed annotations: every field's type a string) would fail at its first
effect on every start, and a correct worker would FAIL (tests/run/test_typed_worker.py).
"""

import dataclasses
import sys
from typing import Any

from tests.gallery.blackbox import outbox, outbox_marks_sent


def decode(cls: type, data: dict[str, Any]) -> Any:
    """`cls` built from `data`, a nested dataclass field from its nested dict."""
    values = {}
    for field in dataclasses.fields(cls):
        value = data[field.name]
        if dataclasses.is_dataclass(field.type):
            value = decode(field.type, value)  # type: ignore[arg-type]
        elif not isinstance(value, field.type):  # type: ignore[arg-type]
            raise TypeError(f"{cls.__name__}.{field.name}: {value!r} is not {field.type}")
        values[field.name] = value
    return cls(**values)


def main(run_id: str) -> int:
    @dataclasses.dataclass(frozen=True)
    class Template:
        n: int

    @dataclasses.dataclass(frozen=True)
    class Email:
        to: str
        template: str
        data: Template

    @dataclasses.dataclass(frozen=True)
    class Charge:
        account: str
        amount_cents: int
        currency: str

    types = {"/v1/emails": Email, "/v1/charges": Charge}
    return outbox_marks_sent.main(run_id, check=lambda path, body: decode(types[path], body))


if __name__ == "__main__":
    sys.exit(outbox.run(main))
