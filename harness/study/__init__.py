"""harness/study."""
