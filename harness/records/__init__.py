"""harness/records."""
