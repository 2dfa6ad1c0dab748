"""XLA study harness: config -> variants -> capture -> analyze (hlo, profile, match) -> report."""
