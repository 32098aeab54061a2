"""What a schedule will do: facts for scripts, and their terminal and HTML renderings."""
