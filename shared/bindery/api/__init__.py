"""The HTTP API: two resolvers, `writes` (the submit function) and `reads` (the poll function), and each
resource's routes on them. What every route shares, the one place domain errors become HTTP answers
included, is `bindery.api.http`; importing this package registers every route."""

from bindery.api import batches, books, exports, webhooks
from bindery.api.http import reads, writes

__all__ = ["batches", "books", "exports", "reads", "webhooks", "writes"]
