"""A saved run read back: one typed view (`SavedRun`) that the rules, the report and compare all
read, and its reader (`load_run`)."""

from harness.saved.read import load_run
from harness.saved.run import Rung, SavedRun, SavedVariant

__all__ = ["Rung", "SavedRun", "SavedVariant", "load_run"]
