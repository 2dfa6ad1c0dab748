"""python -m harness.reanalyze: the entry point a user types, kept where saved reports name it; the
command itself is harness.commands.reanalyze."""

from harness.commands import reanalyze

if __name__ == "__main__":
    reanalyze.run()
