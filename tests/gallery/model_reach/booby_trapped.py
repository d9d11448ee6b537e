"""A step module full of things that run code when they are looked at: a module `__getattr__`, a metaclass
whose classes answer every attribute through code, a table whose `values()` and iteration are its own, an
object that lies about its `__class__`, a property. Each records that it ran in `TRIPPED`: reading this
module for model calls (`may_call_model`) must run none of them. Its `plan` asks the model."""

from __future__ import annotations

from types import FunctionType
from typing import Any

from killpoint.reference_agent import Checkpoint, StepContext, StepResult
from tests.gallery.model_reach.common import START, STATE_VERSION, email, initial_state

TRIPPED: list[str] = []


def __getattr__(name: str) -> Any:
    TRIPPED.append(f"module __getattr__ {name}")
    raise AttributeError(name)


class Watching(type):
    def __getattribute__(cls, name: str) -> Any:
        TRIPPED.append(f"class attribute {name}")
        return super().__getattribute__(name)


class Handlers(metaclass=Watching):
    def ask(self, ctx: StepContext) -> str:
        return ctx.model.ask([{"role": "user", "content": "Plan it."}]).text

    @property
    def name(self) -> str:
        TRIPPED.append("property")
        return "handlers"


class Table(dict):
    def values(self) -> Any:
        TRIPPED.append("values")
        return super().values()

    def __iter__(self) -> Any:
        TRIPPED.append("iter")
        return super().__iter__()

    def get(self, key: Any, default: Any = None) -> Any:
        TRIPPED.append("get")
        return super().get(key, default)


class Disguised:
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        TRIPPED.append("__class__")
        return FunctionType


DISGUISED = Disguised()


def plan(cp: Checkpoint, ctx: StepContext) -> StepResult:
    assert DISGUISED is not None
    return StepResult("email", {"plan": Handlers().ask(ctx)})


STEPS = Table({"plan": plan, "email": email})
__all__ = ["START", "STATE_VERSION", "STEPS", "initial_state"]
