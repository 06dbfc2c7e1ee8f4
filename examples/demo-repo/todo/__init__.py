"""A tiny task list."""
