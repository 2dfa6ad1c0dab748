"""XLA study harness: config -> variants -> capture -> analyze (hlo, profile, match) -> report."""

import time

# When the harness was first imported: a run's breakdown counts its start-up (interpreter,
# config, the first worker and the preflight) from here, so its parts add up to the wall time.
STARTED = time.perf_counter()
