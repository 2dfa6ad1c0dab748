"""python -m harness.commands: a package of commands, not one; says which to run (exit 2)."""

import harness

if __name__ == "__main__":
    harness.moved("harness.commands")
