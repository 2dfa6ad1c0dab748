"""capture stage of the harness pipeline."""
