"""report stage of the harness pipeline."""
