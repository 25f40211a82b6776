"""Speed figures printed by `bat bench <name>` (named `perf` so it is not confused with `bat.benchmark`, the staged
benchmark): each module defines HELP, add_arguments(parser), run(args) -> int."""
