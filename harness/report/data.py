"""The report's "no such figure", where harness.anydump.report still imports it (a saved run read
back is harness.saved's): this module goes once harness/program/ takes anydump (issue 62, item
1) and imports it from harness.common.fmt."""

from harness.common.fmt import MISSING as MISSING

__all__ = ["MISSING"]
