"""harness/common."""
