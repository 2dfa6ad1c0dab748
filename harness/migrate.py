"""python -m harness.migrate: the entry point a user types, kept where saved reports name it; the
command itself is harness.commands.migrate."""

from harness.commands import migrate

if __name__ == "__main__":
    migrate.run()
