"""Scriptorium: long-term memory for LLM agent runtimes."""

from scriptorium.logs import stderr_by_default

__version__ = "0.1.0"

stderr_by_default()  # stdout is the hook and MCP protocols' channel: no library log may land there
