"""python -m harness.analyze --dump=DIR_OR_FILE --out=DIR [--module=REGEX]
    [--xplane=P [--steps=N]] [--ceilings=ceilings.json]

The documented entry point of the analysis of any program's dump and profile, which lives in
its own package (harness.anydump.main); a study's own analysis is harness.analyze.
"""

from harness import cli
from harness.anydump.main import define_flags, main

if __name__ == "__main__":
    define_flags()
    cli.start(main)
