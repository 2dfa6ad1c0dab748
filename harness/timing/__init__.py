"""Timing stage: every captured variant timed together, in interleaved rounds (rounds.py)."""
