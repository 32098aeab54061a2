"""The `asp` command line: one module per command group over the library's Python twins."""
