"""fake_services."""
