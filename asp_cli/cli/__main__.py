"""`python -m asp_cli.cli` runs the command line."""

from asp_cli.cli.entry import main

main()
