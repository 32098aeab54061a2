"""`python -m asp_cli` runs the command line."""

from asp_cli.cli.entry import main

main()
