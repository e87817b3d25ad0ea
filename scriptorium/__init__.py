"""Scriptorium: long-term memory for LLM agent runtimes."""

__version__ = "0.1.0"
