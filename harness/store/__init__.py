"""harness/store."""
