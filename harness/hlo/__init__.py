"""hlo stage of the harness pipeline."""
