"""Scanning a fleet's logs: many sources, merged counts, and reports of them (HTML, Markdown)."""
