"""skillstream: turn agent conversations into memory with Bytewax, LanceDB and DuckDB."""

__version__ = "0.1.0"
