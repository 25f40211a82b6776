"""LLM task writer (paper §2.1): an OpenAI-compatible endpoint (the stand-in `ChatServer`) proposes practice task
parameters; valid proposals become tasks and a bank, invalid ones are rejected with reasons and counted."""

import json

import pytest
from fake_openai import ChatServer

from bat.bank import practice, task_writer
from bat.bank.synthesize import fingerprint, synthesize
from bat.bank.task_writer import Rejected, Slot, TaskWriter, parse_proposal, validate
from bat.benchmark import InstanceParams, generate_instance
from bat.config import load_config
from bat.state.layout import RunLayout

WRITER = [
    "bank.task_writer=llm",
    "bank.task_writer_llm.retries=0",
    "bank.task_writer_llm.timeout_s=5",
]


def _reply(content):
    """A chat completion whose text is `content` (a dict is sent as its JSON text)."""
    text = content if isinstance(content, str) else json.dumps(content)
    return {"choices": [{"message": {"role": "assistant", "content": text}}]}


def _proposal(**changes):
    return {
        "track": "classification",
        "modality": "histology",
        "pitfalls": ["layout", "dependency"],
        "distractors": ["fundus"],
        "cases": 4,
    } | changes


def _config(base, server, *extra):
    """A one-task bank (`base`) whose tasks the LLM writer behind `server` writes, plus `extra` overrides."""
    return load_config(None, [*base, *WRITER, f"bank.task_writer_llm.base_url={server.url}", *extra])


def test_valid_proposals_become_tasks_and_a_bank(tmp_path, one_task_bank):
    stage = _proposal()
    e2e = _proposal(modality="fundus", pitfalls=[], distractors=[], cases=5)
    replies = [_reply(stage), _reply("```json\n" + json.dumps(e2e) + "\n```")]
    banks = []
    for run in ("a", "b"):  # the same reply sequence gives the same bank
        server = ChatServer(list(replies))
        try:
            cfg = _config(one_task_bank, server, "bank.e2e_per_track=1", "bank.task_writer_llm.model=writer")
            bank, reused = synthesize(cfg, RunLayout(tmp_path / run))
        finally:
            server.close()
        assert not reused and len(server.requests) == 2
        banks.append(bank)
    tasks = banks[0].tasks()
    assert [(t.variant, t.reduction is not None) for t in tasks] == [("expert", False), ("expert", True)]
    assert tasks[0].params.model_dump(mode="json") == {
        "modality": "histology",
        "pitfalls": ["layout", "dependency"],
        "distractors": ["fundus"],
        "cases": 4,
    }
    instance = practice.instance_for(tasks[0], cfg)
    assert instance.space == "practice" and instance.modality == "histology" and len(instance.case_ids) == 4
    assert instance.pitfalls["layout"] and instance.pitfalls["dependency"] and not instance.pitfalls["normalisation"]
    assert len(instance.candidates) == 2
    assert tasks[1].params.cases == 5 and tasks[1].reduction.cases <= 5
    assert practice.instance_for(tasks[1], cfg).modality == "fundus"
    # the rest of synthesis is unchanged: teacher runs, stage rows, SFT rows
    assert [t.checked for t in banks[0].trajectories()] == [True, True]
    assert {r.stage for r in banks[0].rows()} >= {"S1", "S5"}
    assert all(r.task.params is not None for r in banks[0].rows())
    counts = banks[0].manifest().counts["task_writer"]
    assert counts["writer"] == "llm:writer" and counts["accepted"] == 2 and counts["rejected"] == 0
    assert counts["unfilled_slots"] == 0
    assert banks[0].manifest().digests == banks[1].manifest().digests
    # the prompt gives the valid names and ranges
    prompt = server.requests[0].body["messages"][-1]["content"]
    for name in ("dermoscopy", "histology", "fundus", "normalisation", "corrupt_case", "from 3 to 6"):
        assert name in prompt


def test_invalid_proposals_are_rejected_with_reasons_and_counted(tmp_path, one_task_bank):
    success = [
        _reply("Sure! Here is a task: classification of histology slides."),
        _reply(_proposal(seed=123)),
        _reply(_proposal(track="radiology")),
        _reply(_proposal(modality="ultrasound")),
        _reply(_proposal(pitfalls=["motion_blur"])),
        _reply(_proposal(cases=500)),
        _reply(_proposal()),
    ]
    recovery = [_reply(_proposal(pitfalls=["dependency"])), _reply(_proposal(distractors=["histology"]))]
    server = ChatServer(success + recovery)  # then the server errs: the third recovery proposal is endpoint_error
    try:
        cfg = _config(
            one_task_bank, server, "bank.outcomes=[success,recovery]", "bank.task_writer_llm.proposals_per_task=7"
        )
        bank, _ = synthesize(cfg, RunLayout(tmp_path / "run"))
    finally:
        server.close()
    assert [(t.variant, t.params.modality) for t in bank.tasks()] == [("expert", "histology")]
    counts = bank.manifest().counts["task_writer"]
    assert counts["rejected_by_reason"] == {
        "endpoint_error": 5,
        "bad_json": 1,
        "schema": 1,
        "unknown_track": 1,
        "unknown_modality": 1,
        "unknown_pitfall": 1,
        "bad_distractors": 1,
        "cases_out_of_range": 1,
        "outcome_unsuited": 1,
    }
    assert counts["accepted"] == 1 and counts["unfilled_slots"] == 1 and counts["slots"] == 2
    assert counts["proposals"] == 1 + counts["rejected"] == 14
    examples = counts["reason_examples"]
    assert "seed" in examples["schema"] and "valid keys" in examples["schema"]
    assert "valid: ['classification']" in examples["unknown_track"]
    assert "ultrasound" in examples["unknown_modality"] and "dermoscopy" in examples["unknown_modality"]
    assert "valid: 3 to 6" in examples["cases_out_of_range"]
    assert "normalisation" in examples["outcome_unsuited"]
    # a rejected proposal's reason is fed back in the next request of the slot
    assert "previous proposal was rejected" in server.requests[1].body["messages"][-1]["content"]


def test_validation_codes_the_bank_run_does_not_reach(monkeypatch, one_task_bank):
    cfg = load_config(None, [*one_task_bank, *WRITER, "bank.tracks=[classification,detection]"])
    slot = Slot("stage", "classification", "success", 0)
    with pytest.raises(Rejected) as err:
        validate(parse_proposal(json.dumps(_proposal(track="detection"))), slot, cfg)
    assert err.value.code == "track_mismatch"
    with pytest.raises(Rejected) as err:
        parse_proposal("[1, 2]")
    assert err.value.code == "bad_json"
    with pytest.raises(Rejected) as err:
        parse_proposal(json.dumps(_proposal(cases="4")))
    assert err.value.code == "schema"

    def refuse(*args, **kwargs):
        raise ValueError("no such instance")

    monkeypatch.setattr(practice, "make_task", refuse)
    params = validate(parse_proposal(json.dumps(_proposal())), slot, cfg)
    with pytest.raises(Rejected) as err:
        task_writer.to_task(params, slot, cfg, bank_seed=7, proposal=0)
    assert err.value.code == "generator_refused" and "no such instance" in err.value.message


def test_default_fingerprint_ignores_the_writer_settings():
    default = load_config(None, [])
    assert default.bank.task_writer == "scripted"
    scripted = fingerprint(default)
    assert fingerprint(load_config(None, ["bank.task_writer_llm.model=other"])) == scripted
    assert "task_writer" not in json.dumps(default.bank.model_dump(exclude={"task_writer", "task_writer_llm"}))
    llm = fingerprint(load_config(None, ["bank.task_writer=llm"]))
    assert llm != scripted
    assert fingerprint(load_config(None, ["bank.task_writer=llm", "bank.task_writer_llm.model=other"])) != llm


def test_the_heldout_space_is_never_used(tmp_path, monkeypatch, one_task_bank):
    import bat.benchmark.secret as secret
    import bat.benchmark.suite as suite

    def forbidden(*args, **kwargs):
        raise AssertionError("the task writer reached the held-out suite")

    for module, name in ((suite, "heldout_suite"), (suite, "suite_instance"), (secret, "load_or_create_secret")):
        monkeypatch.setattr(module, name, forbidden)
    spaces = []

    def recording(track, space, seed, **kwargs):
        spaces.append(space)
        return generate_instance(track, space, seed, **kwargs)

    monkeypatch.setattr(suite, "generate_instance", recording)
    replies = [_reply(_proposal(space="heldout")), _reply(_proposal()), _reply(_proposal(modality="dermoscopy"))]
    server = ChatServer(replies)
    try:
        cfg = _config(one_task_bank, server, "bank.tasks_per_track=2")
        writer = TaskWriter(cfg, 11, tmp_path / task_writer.WRITTEN)
        tasks = writer.plan(["classification"])
    finally:
        server.close()
    assert writer.counts()["rejected_by_reason"] == {"schema": 1}
    assert [t.params.modality for t in tasks] == ["histology", "dermoscopy"]
    for task in tasks:
        assert practice.instance_for(task, cfg).space == "practice"
    assert spaces and set(spaces) == {"practice"}
    assert "heldout" not in json.dumps([s.body for s in server.requests])
    with pytest.raises(ValueError, match="practice space only"):
        generate_instance("classification", "heldout", 3, params=InstanceParams("histology"))
