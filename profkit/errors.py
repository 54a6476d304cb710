"""The few exception types profkit raises. All are ValueErrors, so callers may catch broadly."""

from __future__ import annotations


class ProfkitError(ValueError):
    """Base class of every error profkit raises on its own account."""


class ParseError(ProfkitError):
    """A file (or text) could not be read; names the file and line where known."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)
        self.path = path
        self.line = line


class SchemaError(ProfkitError):
    """A frame lacks columns (or has wrong values) for the table it claims to be."""

    def __init__(self, message: str, *, table: str, columns: tuple[str, ...] = ()):
        super().__init__(f"table {table!r}: {message}")
        self.table = table
        self.columns = columns
