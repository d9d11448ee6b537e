"""reference_agent."""
