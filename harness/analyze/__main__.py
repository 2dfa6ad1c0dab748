"""python -m harness.analyze --dump=DIR_OR_FILE --out=DIR [--module=REGEX]
    [--xplane=P [--steps=N]] [--ceilings=ceilings.json]

The documented entry point of the analysis of any program's dump and profile; the command is
harness.commands.analyze, over harness.program (a study's own analysis is harness.analyze).
"""

from harness.commands import analyze

if __name__ == "__main__":
    analyze.run()
