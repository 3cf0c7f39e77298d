"""Errors of the catalog layer: each says what was wrong and where."""

from __future__ import annotations

from herald.errors import HeraldError


class CatalogError(HeraldError):
    """Base of every error the catalog layer raises on purpose."""


class SourceError(CatalogError, ValueError):
    """The source of records is missing, malformed or holds a value no format can carry."""


class ExportConflict(CatalogError):
    """A file already exists at an immutable export path."""


class MetadataError(CatalogError, ValueError):
    """The dataset description cannot be rendered (bad URI, empty required text...)."""


class TripleStoreError(CatalogError):
    """The triple store refused or failed a request."""
