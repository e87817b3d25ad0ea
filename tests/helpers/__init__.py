"""Helpers shared by test modules (plain modules: no test module imports another)."""
