"""The hostile battery: attacks on the harness's commands, each checked for what it must never do.

Each `cases_*.py` module beside this one holds a `CASES` list of `Case`s; `benchmarks/
hostile_battery.py` runs them all (or those matching `--only`) and prints one row per case.
"""
