"""Runs: preparing a plan run, one plan job, the multi-perspective run and its synthesis
of a recommended plan, resuming a run, and the executor that runs jobs (threads; a batch
on Ray brings its own)."""
