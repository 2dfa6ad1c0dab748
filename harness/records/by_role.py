"""Finding a run's variants by role: the one lookup the rules' view of a summary (harness.
findings.facts.VariantFacts) and the report's (harness.report.data.VariantData) share, since
both wrap one VariantSummary each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from harness.frontends.roles import same_size as same_problem_size
from harness.records.summary import VariantSummary


class OfSummary(Protocol):
    """A view of one variant's summary: its record, its roles and its framework."""

    @property
    def summary(self) -> VariantSummary: ...

    @property
    def roles(self) -> tuple[str, ...]: ...

    @property
    def framework(self) -> str: ...


V = TypeVar("V", bound=OfSummary)


def same_size(a: OfSummary, b: OfSummary) -> bool:
    """True when two variants ran the same m, k, n and batch (harness.frontends.roles)."""
    return same_problem_size(a.summary.identity.problem, b.summary.identity.problem)


def first_with_role(
    variants: Iterable[V], role: str, framework: str = "jax", like: OfSummary | None = None
) -> V | None:
    """The first variant with `role` in `framework` (and of `like`'s size)."""
    for v in variants:
        if role in v.roles and v.framework == framework and (like is None or same_size(v, like)):
            return v
    return None


def all_with_role(variants: Iterable[V], role: str, framework: str = "jax") -> list[V]:
    """Every variant with `role` in `framework`, in the run's order."""
    return [v for v in variants if role in v.roles and v.framework == framework]
