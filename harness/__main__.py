"""python -m harness --config=gelu.yaml [--config.KEY=VALUE ...]: run one study.

Overrides address any config key by its dotted path; a variant is addressed by its name:
    --config.problem.m=64 --config.variants.xla_no_fusion.xla_options.xla_disable_hlo_passes=fusion
"""

import os
import signal
import sys


def _interrupted_at_start(signum: int, frame: object) -> None:
    """Ctrl-C before the run has a folder: nothing to keep, so leave at once and quietly.

    The run installs its own handler once its folder and manifest exist; the worker process
    ends with this one (it asked the kernel for that), so nothing is left behind.
    """
    del frame
    # Never import here: the signal may land while harness.config is half imported, and an
    # import of it would then fail with a traceback. Without harness.study.runs no folder exists.
    runs = sys.modules.get("harness.study.runs")
    abandon = getattr(runs, "abandon", None)
    if abandon is not None:
        abandon()
    sys.stderr.write(f"interrupted ({signal.Signals(signum).name}) before the run started\n")
    os._exit(130)


# First thing, before the imports that take a second: a signal during start-up never
# prints a traceback.
signal.signal(signal.SIGINT, _interrupted_at_start)
signal.signal(signal.SIGTERM, _interrupted_at_start)

from harness.commands import study  # noqa: E402

if __name__ == "__main__":
    study.start()
