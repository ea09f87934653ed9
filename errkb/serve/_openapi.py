"""The OpenAPI document of ``errkb serve`` (``GET /openapi.json``), written as data.

Every endpoint, its parameters, request and response bodies, and the error responses it can
give. The diagnosis and scan objects are described by their keys; their full form is
``docs/api.md``'s (``errkb.diagnosis/1``, ``errkb.scan/1``).
"""

from __future__ import annotations

from typing import Any

from errkb._version import __version__
from errkb.probes._plausible import RANGES
from errkb.serve._fields import WHAT_IF

__all__ = ["openapi"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS = {
    "400": _json(
        _ref("Error"),
        "the body is not valid JSON, or not valid gzip; a header is sent twice",
    ),
    "401": _json(_ref("Error"), "a token is set and the request did not carry it"),
    "403": _json(
        _ref("Error"),
        "the Host header does not name this server, the Origin is another site's, or a scan "
        "lacks the X-Errkb-Client header",
    ),
    "413": _json(_ref("Error"), "the body is over the limit"),
    "415": _json(_ref("Error"), "the Content-Type is not one this endpoint takes"),
    "422": _json(
        _ref("Error"),
        "a field is missing, unknown, of the wrong kind or outside its plausible range: "
        "`field` names it",
    ),
    "500": _json(
        _ref("Error"), "something nobody expected: `request_id` names it in the server's log"
    ),
    "503": _json(
        _ref("Error"), "the request ran past the server's time bound; its work was stopped"
    ),
}


def _errors(*codes: str) -> dict[str, Any]:
    return {code: _ERRORS[code] for code in codes}


_MARKDOWN = {"text/markdown": {"schema": {"type": "string"}}}
_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["status", "error"],
        "properties": {
            "status": {"type": "integer"},
            "error": {"type": "string", "description": "what was wrong, naming the field"},
            "field": {"type": "string", "description": "the field at fault, as a dotted path"},
            "request_id": {"type": "string", "description": "500 only: its id in the log"},
        },
    },
    "WhatIf": {
        "type": "object",
        "additionalProperties": False,
        "description": "values of the customer's machine, used as `errkb explain`'s flags are",
        "properties": {
            "gpu_memory": {
                "oneOf": [
                    {"type": "string"},
                    {
                        "type": "integer",
                        "minimum": RANGES["gpu_memory"].low,
                        "maximum": RANGES["gpu_memory"].high,
                    },
                ],
                "description": WHAT_IF["gpu_memory"],
            },
            "gpu_memory_utilization": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 1,
                "description": WHAT_IF["gpu_memory_utilization"],
            },
            "block_size": {
                "type": "integer",
                "minimum": RANGES["block_size"].low,
                "maximum": RANGES["block_size"].high,
                "description": WHAT_IF["block_size"],
            },
            "kv_cache_dtype": {"type": "string", "description": WHAT_IF["kv_cache_dtype"]},
            "tensor_parallel_size": {
                "type": "integer",
                "minimum": RANGES["tensor_parallel_size"].low,
                "maximum": RANGES["tensor_parallel_size"].high,
                "description": WHAT_IF["tensor_parallel_size"],
            },
            "dtype": {"type": "string", "description": WHAT_IF["dtype"]},
            "model_config": {
                "type": "object",
                "description": WHAT_IF["model_config"]
                + " (at most 256 KiB; never fetched, never executed)",
            },
        },
    },
    "ExplainRequest": {
        "type": "object",
        "required": ["text"],
        "additionalProperties": False,
        "properties": {
            "text": {"type": "string", "description": "a message, a traceback, or a whole log"},
            "what_if": _ref("WhatIf"),
        },
    },
    "Diagnosis": {
        "type": "object",
        "description": "errkb.diagnosis/1, as `errkb explain --json` prints it; every key is "
        "there, empty, when nothing matched",
        "required": ["schema", "exceptions", "matches", "solutions", "facts", "notes"],
        "properties": {
            "schema": {"type": "string", "const": "errkb.diagnosis/1"},
            "exceptions": {"type": "array", "items": {"type": "object"}},
            "matches": {"type": "array", "items": {"type": "object"}},
            "solutions": {"type": "array", "items": {"type": "object"}},
            "facts": {"type": "array", "items": {"type": "object"}},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Scan": {
        "type": "object",
        "description": "errkb.scan/1, as `errkb scan --json` prints it, with the notes of what "
        "was cut",
        "required": ["schema", "lines", "bytes", "groups", "notes"],
        "properties": {
            "schema": {"type": "string", "const": "errkb.scan/1"},
            "lines": {"type": "integer"},
            "bytes": {"type": "integer", "description": "bytes of text read"},
            "groups": {"type": "array", "items": {"type": "object"}},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
    },
    "RecordSummary": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "slug": {"type": "string"},
            "title": {"type": ["string", "null"]},
            "library": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    },
    "RecordList": {
        "type": "object",
        "properties": {
            "total": {"type": "integer", "description": "records that pass the filters"},
            "limit": {"type": "integer"},
            "offset": {"type": "integer"},
            "records": {"type": "array", "items": _ref("RecordSummary")},
        },
    },
    "RecordDetail": {
        "type": "object",
        "properties": {
            "record": {"type": "object", "description": "the record's JSON (schema v2)"},
            "explanation": {"type": "string", "description": "what `errkb show` prints"},
        },
    },
    "Health": {
        "type": "object",
        "properties": {
            "status": {"type": "string", "const": "ok"},
            "records": {"type": "integer"},
            "version": {"type": "string"},
            "token_required": {
                "type": "boolean",
                "const": True,
                "description": "present, and true, only on a server started with a token: "
                "the page asks for it before any /v1 request",
            },
        },
        "required": ["status", "records", "version"],
    },
    "ModelShapes": {
        "type": "object",
        "properties": {
            "shapes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "source": {"type": "string", "description": "the config.json it is from"},
                        "config": {"type": "object"},
                    },
                },
            }
        },
    },
}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": schema, "description": description}


_FORMAT = _query(
    "format",
    {"type": "string", "enum": ["json", "markdown"]},
    "markdown: the diagnosis for a GitHub comment (as does `Accept: text/markdown`)",
)


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document."""
    bounded = _errors("401", "403", "500", "503")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "errkb",
            "version": __version__,
            "description": "Diagnoses of ML and LLM-serving errors, with fixes computed for the "
            "machine described. With a token set, every /v1 request needs `Authorization: "
            "Bearer <token>`.",
        },
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": {
            "/v1/explain": {
                "post": {
                    "summary": "Diagnose a message, a traceback or a log",
                    "security": [{"bearer": []}],
                    "parameters": [
                        _FORMAT,
                        _query(
                            "detail",
                            {"type": "string", "enum": ["short", "long"]},
                            "markdown only: the short form (the fix first) or everything",
                        ),
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _ref("ExplainRequest")}},
                    },
                    "responses": {
                        "200": {
                            "description": "the diagnosis (empty lists when nothing matched)",
                            "content": {
                                "application/json": {"schema": _ref("Diagnosis")},
                                **_MARKDOWN,
                            },
                        },
                        **_errors("400", "401", "403", "413", "415", "422", "500", "503"),
                    },
                }
            },
            "/v1/scan": {
                "post": {
                    "summary": "Find known errors in a log upload, plain or gzip",
                    "security": [{"bearer": []}],
                    "parameters": [
                        {
                            "name": "Content-Encoding",
                            "in": "header",
                            "schema": {"type": "string", "enum": ["gzip"]},
                            "description": "gzip is also recognised by its magic bytes",
                        },
                        {
                            "name": "X-Errkb-Client",
                            "in": "header",
                            "required": True,
                            "schema": {"type": "string"},
                            "description": "any value: other web pages cannot send it",
                        },
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "text/plain": {"schema": {"type": "string"}},
                            "application/gzip": {"schema": {"type": "string", "format": "binary"}},
                            "application/x-gzip": {
                                "schema": {"type": "string", "format": "binary"}
                            },
                            "application/octet-stream": {
                                "schema": {"type": "string", "format": "binary"}
                            },
                        },
                    },
                    "responses": {
                        "200": _json(
                            _ref("Scan"),
                            "what was found; text past the decompressed limit (1 GiB by "
                            "default) is not read, and `notes` says so",
                        ),
                        **_errors("400", "401", "403", "415", "500", "503"),
                    },
                }
            },
            "/v1/records": {
                "get": {
                    "summary": "List the records",
                    "security": [{"bearer": []}],
                    "parameters": [
                        _query("tag", {"type": "string"}, "only records with this tag"),
                        _query("library", {"type": "string"}, "only records of this library"),
                        _query(
                            "limit",
                            {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
                            "records per page",
                        ),
                        _query(
                            "offset", {"type": "integer", "minimum": 0, "default": 0}, "skip these"
                        ),
                    ],
                    "responses": {
                        "200": _json(_ref("RecordList"), "one page of records"),
                        **_errors("422"),
                        **bounded,
                    },
                }
            },
            "/v1/records/{id}": {
                "get": {
                    "summary": "One record and its rendered explanation",
                    "security": [{"bearer": []}],
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                            "description": "the record's id or slug",
                        },
                        _FORMAT,
                    ],
                    "responses": {
                        "200": {
                            "description": "the record, and what `errkb show` prints",
                            "content": {
                                "application/json": {"schema": _ref("RecordDetail")},
                                **_MARKDOWN,
                            },
                        },
                        "404": _json(_ref("Error"), "no record has this id or slug"),
                        **_errors("422"),
                        **bounded,
                    },
                }
            },
            "/v1/model-shapes": {
                "get": {
                    "summary": "Common model configs, for a what-if",
                    "security": [{"bearer": []}],
                    "responses": {
                        "200": _json(_ref("ModelShapes"), "the shapes, each with its source"),
                        **bounded,
                    },
                }
            },
            "/healthz": {
                "get": {
                    "summary": "Whether the server is up, and how many records it holds",
                    "responses": {"200": _json(_ref("Health"), "up")},
                }
            },
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {"200": {"description": "the OpenAPI document"}},
                }
            },
            "/": {
                "get": {
                    "summary": "The console: a page for pasting a failure",
                    "responses": {
                        "200": {"description": "the page", "content": {"text/html": {}}},
                        "404": {"description": "the page is not installed"},
                    },
                }
            },
            "/static/{name}": {
                "get": {
                    "summary": "The page's script, style sheet and images",
                    "parameters": [
                        {
                            "name": "name",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {
                        "200": {"description": "the file"},
                        "404": {"description": "no such file"},
                    },
                }
            },
        },
    }
