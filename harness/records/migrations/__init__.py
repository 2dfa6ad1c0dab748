"""harness/store/records/migrations."""
