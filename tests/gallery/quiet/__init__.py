"""Agents that talk to no service: their effects, if any, are rows of their own tables (not mutants)."""
