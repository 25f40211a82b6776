"""The public interface of a staged benchmark (`bat.staged.interface`: Benchmark, Environment, stages, tasks, scores,
stage states, fingerprints) and the registry that finds one by name (`bat.staged.registry`: Python entry points of
group `bat.benchmarks`, then in-process registrations). It imports nothing else from bat, so configs, phases and
third-party plug-ins can all depend on it."""
