"""Runs: preparing a plan run, one plan job, the multi-perspective run, and the executor
that runs jobs (threads on this machine now; a cluster later)."""
