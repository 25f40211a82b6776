"""Public stage tools: functions `f(workspace, **arguments) -> {"text", "meta"}` run inside the sandbox.

The table (argument models, TOOL_SPECS) lives in `bat.benchmark.tools.specs`; this package imports
nothing heavy so a sandboxed tool call loads only its own module.
"""
