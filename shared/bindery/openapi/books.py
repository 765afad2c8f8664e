"""The OpenAPI document's books, their assets and their exports."""

from __future__ import annotations

from typing import Any

from bindery import metadata as meta
from bindery.engine import FORMATS
from bindery.images import MAX_NAME as MAX_ASSET_NAME
from bindery.images import TYPES
from bindery.openapi.parts import ID, PAGE, TIME, operation

NULLABLE_TEXT = {"type": ["string", "null"]}
METADATA_FIELDS: dict[str, Any] = {
    "authors": {"type": ["array", "null"], "items": {"type": "string", "maxLength": meta.MAX_NAME},
                "maxItems": meta.MAX_AUTHORS},
    "language": {**NULLABLE_TEXT, "maxLength": 35, "description": "a BCP 47 tag; en when not given"},
    "identifier": {**NULLABLE_TEXT, "description": "an ISBN-10 or ISBN-13, kept as its ISBN-13"},
    "publisher": {**NULLABLE_TEXT, "maxLength": meta.MAX_PUBLISHER},
    "description": {**NULLABLE_TEXT, "maxLength": meta.MAX_DESCRIPTION},
    "subjects": {"type": ["array", "null"], "items": {"type": "string", "maxLength": meta.MAX_SUBJECT},
                 "maxItems": meta.MAX_SUBJECTS},
    "published": {**NULLABLE_TEXT, "format": "date"},
    "rights": {**NULLABLE_TEXT, "maxLength": meta.MAX_RIGHTS},
    "cover": {**NULLABLE_TEXT, "maxLength": MAX_ASSET_NAME, "description": "the name of an image asset"},
}  # fmt: skip


def _upload(method: str, **how: Any) -> dict[str, Any]:
    """A presigned upload: its id, where and how to send the bytes, until when, and how many at most."""
    properties = {"upload_id": ID, "upload_url": {"type": "string"}, "method": {"const": method}, **how}
    properties |= {"expires_at": TIME, "max_bytes": {"type": "integer"}}
    return {"type": "object", "required": list(properties), "properties": properties}


def _strings(description: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": {"type": "string"}, "description": description}


SCHEMAS: dict[str, Any] = {
    "Chapter": {
        "type": "object",
        "required": ["ordinal", "title", "size_bytes"],
        "properties": {
            "ordinal": {"type": "integer"},
            "title": {"type": "string"},
            "size_bytes": {"type": "integer"},
        },
    },
    "Book": {
        "type": "object",
        "required": ["id", "title", "revision", "manuscript_bytes", "created_at", "updated_at", "chapters"],
        "properties": {
            "id": ID,
            "title": {"type": "string"},
            "revision": {"type": "integer", "minimum": 1},
            "identifier": {
                "type": "string",
                "description": "urn:isbn:... with an ISBN, else a stable urn:uuid:",
            },
            "metadata": {"$ref": "#/components/schemas/Metadata"},
            "assets": {"type": "array", "items": {"$ref": "#/components/schemas/Asset"}},
            "manuscript_bytes": {"type": "integer"},
            "created_at": TIME,
            "updated_at": TIME,
            "chapters": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/Chapter"},
                "maxItems": 1000,
                "description": "a page of the chapters, in order: at most 1,000",
            },
            "chapters_total": {"type": "integer", "description": "how many chapters the book has"},
            "assets_total": {"type": "integer", "description": "how many images the book has"},
            "chapters_next": {
                "type": ["integer", "null"],
                "description": "pass as chapters_after for the next page; null on the last",
            },
        },
    },
    "Metadata": {"type": "object", "properties": METADATA_FIELDS},
    "MetadataPatch": {
        "type": "object",
        "description": "a JSON merge patch: a field given replaces, null removes, a field left out stays",
        "properties": METADATA_FIELDS,
        "additionalProperties": False,
    },
    "Asset": {
        "type": "object",
        "required": ["name", "content_type", "width", "height", "size_bytes"],
        "properties": {
            "name": {"type": "string"},
            "content_type": {"type": "string", "enum": sorted(TYPES)},
            "width": {"type": "integer"},
            "height": {"type": "integer"},
            "size_bytes": {"type": "integer"},
        },
    },
    "EditBook": {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "metadata": {"$ref": "#/components/schemas/MetadataPatch"},
        },
        "minProperties": 1,
        "additionalProperties": False,
    },
    "CreateAsset": {
        "type": "object",
        "required": ["name", "content_type", "size"],
        "properties": {
            "name": {
                "type": "string",
                "maxLength": MAX_ASSET_NAME,
                "description": "as the manuscript names it",
            },
            "content_type": {"type": "string", "enum": sorted(TYPES)},
            "size": {"type": "integer", "minimum": 1},
        },
        "additionalProperties": False,
    },
    "AssetUpload": _upload(
        "PUT",
        name={"type": "string"},
        headers=_strings("send exactly these headers with the PUT: the URL is signed for them"),
    ),
    "AdoptAsset": {
        "type": "object",
        "required": ["upload_id"],
        "properties": {"upload_id": {"type": "string"}},
        "additionalProperties": False,
    },
    "Export": {
        "type": "object",
        "required": ["id", "book_id", "format", "state", "requested_at", "attempt"],
        "properties": {
            "id": ID,
            "book_id": ID,
            "format": {"type": "string", "enum": sorted(FORMATS)},
            "options": {"type": "object", "description": "the format's options, defaults filled in"},
            "state": {"type": "string", "enum": ["pending", "ready", "failed", "cancelled", "expired"]},
            "requested_at": TIME,
            "started_at": TIME,
            "finished_at": TIME,
            "expires_at": TIME,
            "attempt": {"type": "integer"},
            "size_bytes": {"type": ["integer", "null"]},
            "sha256": {"type": ["string", "null"], "description": "of the artifact's bytes, in hex"},
            "complete": {"type": ["boolean", "null"]},
            "failure_code": {"type": ["string", "null"]},
            "built_revision": {"type": ["integer", "null"]},
            "book_revision": {"type": "integer"},
            "download_url": {"type": ["string", "null"]},
            "download_name": {
                "type": "string",
                "description": "the file name the download is saved as: the title, its letters and digits "
                "in any script kept, anything else a '-'; the download's Content-Disposition carries it as "
                "RFC 6266 filename*=UTF-8''..., beside an ASCII filename",
            },
            "download_expires_at": TIME,
            "progress": {
                "type": "object",
                "properties": {"chapters_done": {"type": "integer"}, "chapters_total": {"type": "integer"}},
            },
            "skipped_chapters": {"type": "array", "items": {"type": "object"}, "maxItems": 100},
            "skipped_chapters_total": {"type": "integer"},
            "missing_images": {"type": "array", "items": {"type": "object"}, "maxItems": 50},
            "missing_images_total": {"type": "integer"},
            "warnings": {
                "type": "array",
                "maxItems": 50,
                "description": "what the book has that a reader may miss, the first 50",
                "items": {
                    "type": "object",
                    "required": ["code", "chapter"],
                    "properties": {
                        "code": {
                            "type": "string",
                            "enum": ["empty_alt", "link_unlanded", "math_unread"],
                            "description": "empty_alt: an image with no alt text (`name`); link_unlanded: a "
                            "link, or a numbered reference (`@fig-x`), that lands nowhere in the book, kept "
                            "as its words (`href`, `line` in the chapter, `text`); math_unread: TeX that "
                            "does not convert, shown as typed, in code (`line`, `tex`)",
                        },
                        "chapter": {"type": "integer"},
                        "chapter_title": {"type": "string"},
                        "name": {"type": "string"},
                        "href": {"type": "string"},
                        "line": {"type": ["integer", "null"]},
                        "text": {"type": "string"},
                        "tex": {
                            "type": "string",
                            "description": "math_unread: its TeX, the first 200 characters",
                        },
                    },
                },
            },
            "warnings_total": {"type": "integer"},
        },
    },
    "BookSummary": {
        "type": "object",
        "required": [
            "id",
            "title",
            "revision",
            "identifier",
            "metadata",
            "manuscript_bytes",
            "chapters_total",
            "assets_total",
            "created_at",
            "updated_at",
        ],
        "additionalProperties": False,
        "description": "a book as GET /books/{bookId} shows it, without its chapters; its assets counted",
        "properties": {
            "id": ID,
            "title": {"type": "string"},
            "revision": {"type": "integer", "minimum": 1},
            "identifier": {"type": "string"},
            "metadata": {"$ref": "#/components/schemas/Metadata"},
            "manuscript_bytes": {"type": "integer"},
            "chapters_total": {"type": "integer"},
            "assets_total": {"type": "integer"},
            "created_at": TIME,
            "updated_at": TIME,
        },
    },
    "BookPage": {
        "type": "object",
        "required": ["books", "next_cursor"],
        "properties": {
            "books": {"type": "array", "items": {"$ref": "#/components/schemas/BookSummary"}},
            "next_cursor": {"type": ["string", "null"]},
        },
    },
    "ExportPage": {
        "type": "object",
        "required": ["exports", "next_cursor"],
        "properties": {
            "exports": {"type": "array", "items": {"$ref": "#/components/schemas/Export"}},
            "next_cursor": {"type": ["string", "null"]},
        },
    },
    "Upload": _upload(
        "POST",
        fields=_strings("form fields to send as they are, before the manuscript as the form's `file`"),
    ),
    "CreateBook": {
        "type": "object",
        "required": ["manuscript"],
        "properties": {
            "title": {
                "type": "string",
                "description": "required unless the manuscript's front matter gives one (this wins)",
            },
            "manuscript": {
                "type": "string",
                "description": "markdown; a YAML metadata block or `%` title block at its top is the book's "
                "title and metadata (the request's own fields win), never a chapter",
            },
            "metadata": {"$ref": "#/components/schemas/MetadataPatch"},
        },
        "additionalProperties": False,
    },
    "ReplaceManuscript": {
        "oneOf": [
            {
                "type": "object",
                "required": ["manuscript"],
                "properties": {"manuscript": {"type": "string"}},
                "additionalProperties": False,
            },
            {
                "type": "object",
                "required": ["upload_id"],
                "properties": {"upload_id": {"type": "string"}},
                "additionalProperties": False,
            },
        ]
    },
    "CreateExport": {
        "type": "object",
        "required": ["format"],
        "properties": {
            "format": {"type": "string", "enum": sorted(FORMATS)},
            "options": {
                "type": "object",
                "description": "per format: "
                + "; ".join(
                    f"{name}: "
                    + ", ".join(f"{o} ({'|'.join(map(str, opt.allowed))})" for o, opt in fmt.options.items())
                    for name, fmt in sorted(FORMATS.items())
                    if fmt.options
                ),
            },
        },
        "additionalProperties": False,
    },
}


BOOK_ID = {"name": "bookId", "in": "path", "required": True, "schema": {"type": "string"}}
EXPORT_ID = {"name": "exportId", "in": "path", "required": True, "schema": {"type": "string"}}
IDEMPOTENCY_KEY = {"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string"}}
IF_MATCH = {"name": "If-Match", "in": "header", "required": False, "schema": {"type": "string"}}
ASSET_NAME = {
    "name": "name+",
    "in": "path",
    "required": True,
    "description": "the asset's name, a path (images/coast.png): slashes as they are, or as %2F",
    "schema": {"type": "string"},
}
CHAPTERS_AFTER = {
    "name": "chapters_after",
    "in": "query",
    "required": False,
    "description": "list the chapters after this ordinal (the last page's chapters_next)",
    "schema": {"type": "integer", "minimum": 0, "maximum": 999_999_999},
}


def _next_revision(
    operation_id: str,
    summary: str,
    parameters: list[dict[str, Any]],
    body: str,
    said: dict[int, str] | None = None,
) -> dict[str, Any]:
    """A change that publishes the book's next revision: each answers alike, with the book, and refuses
    alike (If-Match, a book that kept changing, a body too large or not acceptable)."""
    answers: dict[int, tuple[str, str | None]] = {200: ("the book at its new revision", "Book")}
    errors = (400, 404, 409, 412, 413, 422, 503)
    return operation(
        operation_id, f"{summary}: revision + 1", parameters, answers, errors, body=body, said=said
    )


ADOPT_REFUSED = (
    "the upload is not what was asked for (see `error.code`): nothing uploaded (`upload_not_found`), another "
    "size than declared (`upload_size_mismatch`, with `error.declared_bytes` and `error.uploaded_bytes`), or "
    "not an accepted image"
)

# Route key (as template.yaml and API Gateway write it) -> operation.
OPERATIONS: dict[str, dict[str, Any]] = {
    "POST /books": operation(
        "createBook", "Create a book from a Markdown manuscript (to 5 MB)", [IDEMPOTENCY_KEY],
        {201: ("revision 1", "Book"), 200: ("a replayed Idempotency-Key: the book it made", "Book")},
        (400, 409, 413, 422, 503), body="CreateBook"),
    "GET /books": operation(
        "listBooks", "Your books, newest first", PAGE, {200: ("one page", "BookPage")}, (400, 503)),
    "GET /books/{bookId}": operation(
        "getBook", "A book and its chapters, a page at a time", [BOOK_ID, CHAPTERS_AFTER],
        {200: ("the book", "Book")}, (400, 404, 503)),
    "PATCH /books/{bookId}": _next_revision(
        "editBook", "Edit the title or metadata (a merge patch)", [BOOK_ID, IF_MATCH], "EditBook"),
    "POST /books/{bookId}/assets": operation(
        "createAsset", "A presigned PUT for an image (PNG, JPEG, GIF, WebP) to name in the text", [BOOK_ID],
        {201: ("where to upload", "AssetUpload")}, (400, 404, 413, 422, 503), body="CreateAsset"),
    "PUT /books/{bookId}/assets/{name+}": _next_revision(
        "adoptAsset", "Check the uploaded image, make it the book's", [BOOK_ID, ASSET_NAME, IF_MATCH],
        "AdoptAsset", said={422: ADOPT_REFUSED}),
    "DELETE /books/{bookId}/assets/{name+}": operation(
        "deleteAsset", "Remove an asset: revision + 1; its bytes go once no build reads them",
        [BOOK_ID, ASSET_NAME, IF_MATCH], {204: ("removed", None)}, (400, 404, 409, 412, 422, 503)),
    "PUT /books/{bookId}/manuscript": _next_revision(
        "replaceManuscript", "Replace the manuscript: re-cut", [BOOK_ID, IF_MATCH], "ReplaceManuscript"),
    "POST /books/{bookId}/uploads": operation(
        "createUpload", "A presigned POST for a manuscript of 1 byte to 500 MiB", [BOOK_ID],
        {201: ("where to upload", "Upload")}, (404, 503)),
    "DELETE /books/{bookId}": operation(
        "deleteBook", "Delete a book; its exports end and their bytes go", [BOOK_ID],
        {204: ("deleted", None)}, (404, 409, 503)),
    "POST /books/{bookId}/exports": operation(
        "createExport", "Request an export (always accepted for a book you own)", [BOOK_ID, IDEMPOTENCY_KEY],
        {202: ("accepted; poll Location", "Export")}, (400, 404, 413, 422, 429, 503, 507),
        body="CreateExport"),
    "GET /books/{bookId}/exports": operation(
        "listExports", "A book's exports, newest first", [BOOK_ID, *PAGE],
        {200: ("one page", "ExportPage")}, (400, 404, 503)),
    "GET /books/{bookId}/exports/{exportId}": operation(
        "getExport", "Poll an export; a ready one carries a fresh download URL", [BOOK_ID, EXPORT_ID],
        {200: ("the export", "Export")}, (404, 503)),
    "DELETE /books/{bookId}/exports/{exportId}": operation(
        "cancelExport", "Cancel a pending export, or end a ready one's link now", [BOOK_ID, EXPORT_ID],
        {204: ("ended", None)}, (404, 503)),
}  # fmt: skip
