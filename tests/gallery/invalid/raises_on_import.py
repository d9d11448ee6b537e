"""Not importable: the module raises while it is imported."""

raise RuntimeError("configuration file agent.toml not found")
