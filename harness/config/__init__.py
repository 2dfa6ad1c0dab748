"""config stage of the harness pipeline."""
