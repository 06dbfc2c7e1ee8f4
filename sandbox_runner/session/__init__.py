"""Interactive sessions: permission modes, the work session and the plan session, the plan
file, line mode; the terminal UI drives the same `Session` (`session.py`)."""
