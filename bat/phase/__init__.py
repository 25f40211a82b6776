"""The phase contract, below every phase: what a phase function receives and returns, where it logs, the
held-out guard it runs under, the phase names and their order, and the round plan it starts from.

Imports run one way: `cli`/`jobs` -> `orchestrate` -> the phase modules (`bank.phase`, `leakage.phase`,
`train.phase`, `rollout.phase`, `verify.phase`, `evaluate.phase`, `curriculum.phase`) -> `phase`, `state`,
`schemas`, `config`. Nothing here imports a phase module or the orchestrator.
"""
