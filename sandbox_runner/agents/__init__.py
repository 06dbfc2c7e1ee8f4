"""Subagent definitions, the registry that loads them, their prompts and the agent loop."""
