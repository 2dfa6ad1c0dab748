"""harness/commands."""
