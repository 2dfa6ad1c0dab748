"""variants stage of the harness pipeline."""
