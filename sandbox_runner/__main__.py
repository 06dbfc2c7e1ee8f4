"""`python -m sandbox_runner` runs the planrun command line."""

from sandbox_runner.cli import main

main()
