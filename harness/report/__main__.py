"""python -m harness.report --run=results/gelu/latest: the documented entry point; the
command is harness.commands.report."""

from harness.commands import report

if __name__ == "__main__":
    report.run()
