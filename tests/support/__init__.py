"""Helpers shared by the tests of every layer (imported as `support.*`; tests/ is on the path)."""
