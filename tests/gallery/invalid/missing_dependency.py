"""Not importable: the module exists, but a module it imports does not."""

import killpoint_no_such_dependency  # noqa: F401

START = "plan"
