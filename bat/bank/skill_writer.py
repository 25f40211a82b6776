"""LLM stage-skill writer: rewrite each stage's public skill text (kappa) from aggregate diagnostics (paper §2.3: the
agent's public stage skills are distilled from training-time LLM prescriptions; they restate each stage's goal,
checks and recovery steps without carrying evaluation content).

Reads: the newest controller aggregate of a round before refresh k (`bat.bank.aggregates`; only its per-stage and
per-track numbers enter a request — never runs, transcripts, checkpoint names or held-out content), the configured
stages with their current skill texts, `bank.skill_writer` / `bank.skill_llm`, and the manifests of complete bank
versions (a request already answered for an earlier version is reused, not sent again).
Writes: nothing; `prescribe` returns the config whose `bank.skills` holds the usable rewrites (synthesis writes them
into the version's `skills.json` and its rows) and the manifest record (per stage: source and fallback reason,
reasons counted).

A reply that is not a usable skill keeps that stage's static text; the reasons are `FALLBACK_REASONS`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from bat.bank.aggregates import newest_controller_aggregate
from bat.bank.skills import stage_skills

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.schemas.evaluation import EvalAggregate
    from bat.state.layout import RunLayout

PROMPT_VERSION = "1"
"""Version of the request wording below; part of the request digest."""

FALLBACK_REASONS: dict[str, str] = {
    "endpoint_error": "the endpoint failed after every retry (bank.skill_llm.retries)",
    "not_json": "the reply is not one JSON object",
    "missing_field": 'the JSON object lacks a string "stage" or a string "skill"',
    "unknown_stage": "the reply names a stage key that is not configured",
    "stage_mismatch": "the reply names a configured stage other than the one asked for",
    "empty": "the skill text is blank",
    "too_long": "the skill text is longer than bank.skill_llm.max_chars (never clipped)",
}
"""Why a stage kept its static text, checked in this order."""

SYSTEM_PROMPT = (
    "You write the public skill text of one stage of a staged agent workflow: the stage's goal, the checks to run "
    "and the recovery steps when a check fails. You are given the current skill text and aggregate scores (0 to 1) "
    "of the current policy, overall, per stage and per track. Use the scores to decide what the skill should stress. "
    "Name no task, case, file or answer. Reply with exactly one JSON object and nothing else: "
    '{"stage": "<the stage key you were asked about>", "skill": "<the new skill text>"}.'
)


def _num(value: float | int | None) -> float | int | None:
    return round(value, 4) if isinstance(value, float) else value


def aggregate_numbers(agg: EvalAggregate, stage_keys: list[str]) -> dict[str, Any]:
    """The numbers of a controller aggregate a request may carry: Overall / Task / Agentic, each stage's score, and
    per track the same plus run and null counts. Everything else of the aggregate (checkpoint, digests, versions,
    null-cell reasons) stays out."""
    return {
        "overall": _num(agg.overall),
        "task": _num(agg.task),
        "agentic": _num(agg.agentic),
        "stages": {k: _num(agg.stages.get(k)) for k in stage_keys},
        "n_runs": agg.n_runs,
        "null_cells": len(agg.null_cells),
        "tracks": {
            name: {
                "overall": _num(t.overall),
                "task": _num(t.task),
                "agentic": _num(t.agentic),
                "stages": {k: _num(t.stages.get(k)) for k in stage_keys},
                "n_runs": t.n_runs,
                "n_null": t.n_null,
            }
            for name, t in sorted(agg.tracks.items())
        },
    }


def request_messages(config: BatConfig, stage: str, scores: dict[str, Any]) -> list[dict[str, str]]:
    """Chat messages asking for `stage`'s skill: the instructions, then the stage key and name, the stage order,
    the stage's current (public) skill text, the reply cap and the aggregate `scores`."""
    names = {s.key: s.name for s in config.stages}
    body = {
        "stage": stage,
        "stage_name": names[stage],
        "stage_order": list(config.stage_keys),
        "current_skill": stage_skills(config).get(stage, ""),
        "max_chars": config.bank.skill_llm.max_chars,
        "scores": scores,
    }
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": json.dumps(body, sort_keys=True, indent=1)},
    ]


def parse_reply(text: str, stage: str, stage_keys: list[str], max_chars: int) -> tuple[str | None, str | None]:
    """(skill text, None) for a usable reply to the request for `stage`, else (None, reason in FALLBACK_REASONS).
    A reply wrapped in one Markdown code fence is unwrapped first."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rstrip().removesuffix("```")
    try:
        reply = json.loads(body)
    except ValueError:
        return None, "not_json"
    if not isinstance(reply, dict):
        return None, "not_json"
    named, skill = reply.get("stage"), reply.get("skill")
    if not isinstance(named, str) or not isinstance(skill, str):
        return None, "missing_field"
    if named not in stage_keys:
        return None, "unknown_stage"
    if named != stage:
        return None, "stage_mismatch"
    skill = skill.strip()
    if not skill:
        return None, "empty"
    if len(skill) > max_chars:
        return None, "too_long"
    return skill, None


def request_digest(config: BatConfig, requests: dict[str, list[dict[str, str]]]) -> str:
    """`sha256:<hex>` of everything that decides the replies: prompt version, model, sampling, cap, messages."""
    llm = config.bank.skill_llm
    payload = {
        "prompt_version": PROMPT_VERSION,
        "model": llm.model,
        "temperature": llm.temperature,
        "max_tokens": llm.max_tokens,
        "max_chars": llm.max_chars,
        "requests": requests,
    }
    return "sha256:" + hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def _answered(layout: RunLayout, digest: str) -> tuple[int, dict[str, Any], dict[str, str]] | None:
    """(version, skills record, bank.skills) of the newest complete version whose manifest answered `digest`."""
    from bat.bank.store import BankVersion, complete_versions

    for version in reversed(complete_versions(layout)):
        config = BankVersion(layout.bank(version), version).manifest().config
        record = config.get("skills") or {}
        if record.get("request_digest") == digest:
            return version, record, dict(config.get("bank", {}).get("skills") or {})
    return None


def _ask(config: BatConfig, requests: dict[str, list[dict[str, str]]]) -> tuple[dict[str, str], dict[str, Any]]:
    """Send each stage's request; (usable rewrites, per-stage record)."""
    from bat.bank.llm_client import ChatClient, TeacherEndpointError

    llm = config.bank.skill_llm
    client = ChatClient(llm)
    keys = list(config.stage_keys)
    rewrites: dict[str, str] = {}
    stages: dict[str, Any] = {}
    for stage, messages in requests.items():
        try:
            skill, reason = parse_reply(client.complete(messages), stage, keys, llm.max_chars)
        except TeacherEndpointError:
            skill, reason = None, "endpoint_error"
        if skill is not None:
            rewrites[stage] = skill
        stages[stage] = {"source": "llm" if skill is not None else "static", "reason": reason}
    return rewrites, stages


def prescribe(config: BatConfig, layout: RunLayout, refresh: int) -> tuple[BatConfig, dict[str, Any] | None]:
    """The config a refresh synthesizes with and the manifest's `config.skills` record (None for the static writer).

    With `bank.skill_writer: llm` and a controller aggregate before refresh k >= 1, every configured stage is asked
    for once; usable replies go into `bank.skills`, every other stage keeps its text. Without an aggregate (the
    bootstrap) every stage keeps its static text. Never raises for an endpoint or reply problem."""
    if config.bank.skill_writer == "static":
        return config, None
    found = newest_controller_aggregate(layout, refresh) if refresh >= 1 else None
    if found is None:
        return config, {"writer": "llm", "source_round": None, "kept_static": "no_aggregates"}
    source, agg = found
    scores = aggregate_numbers(agg, list(config.stage_keys))
    requests = {stage: request_messages(config, stage, scores) for stage in config.stage_keys}
    digest = request_digest(config, requests)
    answered = _answered(layout, digest)
    if answered is not None:
        version, record, rewrites = answered
        record = {**record, "reused_from": version}
    else:
        rewrites, stages = _ask(config, requests)
        reasons = Counter(s["reason"] for s in stages.values() if s["reason"])
        record = {
            "writer": "llm",
            "prompt_version": PROMPT_VERSION,
            "model": config.bank.skill_llm.model,
            "source_round": source,
            "request_digest": digest,
            "stages": stages,
            "rewritten": sorted(rewrites),
            "fallbacks_by_reason": dict(sorted(reasons.items())),
        }
    bank = config.bank.model_copy(update={"skills": {**config.bank.skills, **rewrites}})
    return config.model_copy(update={"bank": bank}), record
