"""Training signal over finished runs, by pool, by the bank state's outcome, and by GRPO group size.

`python -m bat.verify.signal_report PATH [PATH ...]` reads, for every round of each run (an arm x seed state
directory of `bat experiment`, or any `state/<run>`) whose verify phase finished, the round's reward records
(`round_NN/verify/shard_*/rewards.jsonl`), its plan (`round_NN/plan.json`: the bank version it drew from) and that
bank version's RL rows (each state's outcome: a success, recovery or failure teacher trajectory, or an E2E row); a
PATH that is a file is a committed arm x seed record (`<out>/runs/<arm>/seed_<s>.json`) whose rounds kept each
group's rewards and outcome (`group_rewards`, written by `bat experiment`'s collection). It prints one JSON object
(or, with `--markdown`, two tables):

* `by_pool`: per group size k in `--sizes`, the groups with at least k valid rewards and how many of them would
  have had identical rewards had each drawn k of its rollouts (expected: `bat.verify.signal.group_size_of`; at
  the rounds' own K, observed);
* `by_outcome`: per (pool, outcome) the groups, rollouts, mean reward and the groups with identical rewards.

Training-side files only (rewards, plans, the bank, committed arm x seed records); writes nothing. Exit 2 with one
message for a path that is not a run directory or a round whose files cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bat.schemas.rollout import RewardRecord
from bat.verify.signal import group_size_of, rewards_by_group

DEFAULT_SIZES = (2, 4, 6, 8)
"""Group sizes reported by default (the experiments' K is 8)."""


class SignalReportError(ValueError):
    """A run directory or round file that cannot be read; the message names the path and what to do."""


def round_rewards(run_dir: Path) -> list[tuple[int, list[RewardRecord], dict[str, str]]]:
    """(round, its reward records, state_id -> bank outcome) for each round of `run_dir` whose verify phase holds
    a finished shard, in round order. Raises SignalReportError for a path with no rounds or a round without a plan
    or whose bank version is missing."""
    from pydantic import ValidationError

    from bat.bank.store import open_bank
    from bat.schemas.routing import RoundPlan
    from bat.state.atomic import read_json
    from bat.state.layout import RunLayout
    from bat.verify.shards import read_rewards

    layout = RunLayout(Path(run_dir))
    if not layout.rounds():
        raise SignalReportError(f"{layout.root}: no round_NN folders; pass a run's state directory")
    out = []
    for index in layout.rounds():
        rewards = read_rewards(layout.phase_dir(index, "verify")) if layout.phase_dir(index, "verify").is_dir() else []
        if not rewards:
            continue
        plan_path = layout.plan(index)
        if not plan_path.exists():
            raise SignalReportError(f"{plan_path}: not found; a round with rewards needs the plan it was drawn from")
        try:
            plan = RoundPlan.model_validate(read_json(plan_path))
        except ValidationError as exc:
            raise SignalReportError(
                f"{plan_path}: not a round plan ({exc.error_count()} errors: {exc.errors()[0]['msg']})"
            ) from exc
        try:
            bank = open_bank(layout, plan.bank_version, admitted_only=False)
            outcome = {r.state_id: bank.row(r.state_id).outcome for r in rewards}
        except (KeyError, FileNotFoundError, ValueError) as exc:
            raise SignalReportError(f"{plan_path}: its bank v{plan.bank_version} cannot be read: {exc}") from exc
        out.append((index, rewards, outcome))
    return out


def outcome_label(pool: str, outcome: str) -> str:
    """A group's outcome label: `e2e` for E2E rows, else the bank state's outcome."""
    return "e2e" if pool == "E2E" else outcome


Group = tuple[str, str, str, list[float]]
"""One GRPO group of a round: (pool, state_id, outcome label, its valid rewards)."""


def state_groups(run_dir: Path) -> dict[int, list[Group]]:
    """The groups of every finished round of a run state dir (`round_rewards`), by round, in (pool, state) order."""
    return {
        index: [
            (pool, state_id, outcome_label(pool, outcome[state_id]), values)
            for pool, groups in sorted(rewards_by_group(rewards).items())
            for state_id, values in sorted(groups.items())
        ]
        for index, rewards, outcome in round_rewards(run_dir)
    }


def piece_groups(path: Path) -> list[list[Group]]:
    """The groups of every RL round a committed arm x seed record (`runs/<arm>/seed_<s>.json`) kept in its signal
    (`group_rewards`); SignalReportError for a file that is not such a record or kept none (older pieces)."""
    from bat.state.atomic import read_json

    record = read_json(path)
    rounds = [s.get("group_rewards") for s in (record.get("signal") or [])] if isinstance(record, dict) else []
    kept = [groups for groups in rounds if groups]
    if not kept:
        raise SignalReportError(
            f"{path}: no round's `group_rewards` in its `signal` (a piece collected before they were kept, or not "
            "an arm x seed record); pass the arm x seed's state directory instead"
        )
    return [[(g["pool"], g["state_id"], g["outcome"], list(g["rewards"])) for g in groups] for groups in kept]


def signal_report(paths: Sequence[Path], sizes: Sequence[int] = DEFAULT_SIZES) -> dict[str, Any]:
    """The report described in the module docstring over every finished round of `paths` (run state dirs, or
    committed arm x seed records that kept their groups' rewards)."""
    by_pool: dict[str, dict[str, Any]] = {}
    by_outcome: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {"groups": 0, "rollouts": 0, "reward_sum": 0.0, "groups_identical": 0}
    )
    rounds = 0
    for path in paths:
        for groups in piece_groups(path) if Path(path).is_file() else state_groups(path).values():
            rounds += 1
            by_state: dict[str, dict[str, list[float]]] = defaultdict(dict)
            for pool, state_id, label, values in groups:
                by_state[pool][state_id] = values
                into = by_outcome[(pool, label)]
                into["rollouts"] += len(values)
                into["reward_sum"] += sum(values)
                if len(values) >= 2:
                    into["groups"] += 1
                    into["groups_identical"] += int(max(values) - min(values) <= 1e-9)
            for pool, stats in group_size_of(by_state, sizes).items():
                into = by_pool.setdefault(
                    pool, {"groups": dict.fromkeys(sizes, 0), "identical": dict.fromkeys(sizes, 0.0)}
                )
                for k in sizes:
                    into["groups"][k] += stats["groups"][k]
                    into["identical"][k] += stats["identical"][k]
    outcomes = [
        {
            "pool": pool,
            "outcome": label,
            "groups": v["groups"],
            "rollouts": v["rollouts"],
            "reward_mean": v["reward_sum"] / v["rollouts"] if v["rollouts"] else None,
            "groups_identical": v["groups_identical"],
        }
        for (pool, label), v in sorted(by_outcome.items())
    ]
    return {
        "runs": [str(p) for p in paths],
        "rounds": rounds,
        "sizes": list(sizes),
        "by_pool": by_pool,
        "by_outcome": outcomes,
    }


def _share(identical: float, groups: int) -> str:
    return f"{identical:.1f} of {groups} ({identical / groups:.0%})" if groups else "no group"


def markdown(report: dict[str, Any]) -> str:
    """The report's two tables as Markdown."""
    sizes = report["sizes"]
    lines = [
        f"Over {report['rounds']} rounds. Groups with identical rewards (no gradient) at group size k "
        "(expected, had each group drawn k of its rollouts) of the groups with at least k valid rewards:",
        "",
        "| pool | " + " | ".join(f"k={k}" for k in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for pool, v in sorted(report["by_pool"].items()):
        cells = " | ".join(_share(v["identical"][k], v["groups"][k]) for k in sizes)
        lines.append(f"| {pool} | {cells} |")
    lines += [
        "",
        "| pool | state outcome | groups | rollouts | mean reward | identical groups |",
        "|---|---|---|---|---|---|",
    ]
    for row in report["by_outcome"]:
        mean = "-" if row["reward_mean"] is None else f"{row['reward_mean']:.3f}"
        lines.append(
            f"| {row['pool']} | {row['outcome']} | {row['groups']} | {row['rollouts']} | {mean} | {row['groups_identical']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bat.verify.signal_report", description=__doc__.splitlines()[0])
    parser.add_argument(
        "run_dirs",
        type=Path,
        nargs="+",
        help="run state directories (arm x seed folders) or committed arm x seed records",
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES), help="group sizes k (>= 2)")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables instead of JSON")
    args = parser.parse_args(argv)
    from bat.state.errors import StateFileError

    try:
        report = signal_report(args.run_dirs, args.sizes)
    except (SignalReportError, StateFileError, FileNotFoundError) as exc:
        print(f"signal_report: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"signal_report: {exc}", file=sys.stderr)
        return 2
    print(markdown(report) if args.markdown else json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
