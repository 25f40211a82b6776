"""Find staged benchmarks by name: Python entry points (group `bat.benchmarks`) and in-process registrations.

A package adds a benchmark by declaring, in its pyproject.toml,

    [project.entry-points."bat.benchmarks"]
    mybench = "mypkg.bench:MyBenchmark"

and `pip install`-ing it; the object named there is a factory `factory(config) -> Benchmark`
(`bat.staged.interface`). The benchmarks bat ships are also known without installed metadata (`SHIPPED`), and a
test or a notebook can `register(name, factory)`. An installed entry point of the same name wins over `SHIPPED`; an
in-process registration wins over both.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from bat.staged.interface import Benchmark

ENTRY_POINT_GROUP = "bat.benchmarks"
SHIPPED: dict[str, str] = {
    "builtin": "bat.benchmark.plugin:BuiltinBenchmark",
    "sqlqa": "bat.benchmarks.sqlqa:SqlQA",
}
"""The benchmarks shipped with bat (also declared as entry points in pyproject.toml)."""

Factory = Callable[[Any], Benchmark]
_REGISTERED: dict[str, Factory] = {}


class UnknownBenchmarkError(KeyError):
    """No benchmark of that name is installed or registered (the message lists the known names)."""

    def __str__(self) -> str:
        return str(self.args[0])


def register(name: str, factory: Factory) -> None:
    """Make `factory` available as benchmark `name` in this process (overrides installed ones of that name)."""
    _REGISTERED[name] = factory


def unregister(name: str) -> None:
    """Forget an in-process registration (installed and shipped benchmarks stay)."""
    _REGISTERED.pop(name, None)


def _load_ref(ref: str) -> Factory:
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def _sources() -> dict[str, Callable[[], Factory]]:
    found: dict[str, Callable[[], Factory]] = {name: (lambda ref=ref: _load_ref(ref)) for name, ref in SHIPPED.items()}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.load
    for name, factory in _REGISTERED.items():
        found[name] = lambda factory=factory: factory
    return found


def names() -> list[str]:
    """Names of every benchmark available here, sorted."""
    return sorted(_sources())


def load(name: str, config: Any = None) -> Benchmark:
    """The benchmark `name` built by its factory with `config` (bat's config or None); UnknownBenchmarkError lists the
    valid names; a factory that does not give a `Benchmark` is a TypeError naming it."""
    sources = _sources()
    if name not in sources:
        raise UnknownBenchmarkError(
            f"unknown benchmark {name!r}; valid: {sorted(sources)} (install a package that declares an entry point "
            f"in group {ENTRY_POINT_GROUP!r}, or register() it)"
        )
    bench = sources[name]()(config)
    if not isinstance(bench, Benchmark):
        raise TypeError(f"benchmark {name!r}: its factory returned {type(bench).__name__}, not a Benchmark")
    return bench


def from_config(config: Any) -> Benchmark:
    """The benchmark a bat config names (`benchmark.name`), built with that config."""
    return load(config.benchmark.name, config)
