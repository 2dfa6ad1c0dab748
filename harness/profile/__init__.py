"""profile stage of the harness pipeline."""
