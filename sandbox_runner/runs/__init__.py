"""Runs: preparing a plan run, one plan job, the multi-perspective run and its synthesis
of a recommended plan, and the executor that runs jobs (threads here; a cluster later)."""
