"""match stage of the harness pipeline."""
