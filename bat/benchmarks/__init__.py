"""Staged benchmarks shipped with bat as plug-ins: each imports only `bat.staged.interface` (and the standard
library), like a third-party package would (`tests/benchmark/test_plugin_imports.py` enforces it).

* `sqlqa` — questions over small synthetic SQLite databases in four stages: inspect, draft, validate, submit.
"""
