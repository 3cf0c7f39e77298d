"""Errors of the generations application (adapters map them to HTTP problems)."""

from __future__ import annotations

from herald.errors import HeraldError


class GenerationsError(HeraldError):
    """Base class."""


class NotFound(GenerationsError, LookupError):
    """No such dataset, run, partition, candidate or quarantine item."""


class PlanError(GenerationsError, ValueError):
    """A run, backfill or action was declared with something missing or inconsistent."""


class Refused(GenerationsError):
    """An action is not allowed in the record's present state (or without a scope)."""


class QuarantineFull(GenerationsError):
    """The dataset's quarantine holds its cap: input is refused rather than piled up."""
