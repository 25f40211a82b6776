"""Benchmarks printed by `bat bench <name>`: each module defines HELP, add_arguments(parser), run(args) -> int."""
