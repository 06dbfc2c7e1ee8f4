"""The operations, one module each; the server's OPS table names them."""

from __future__ import annotations
