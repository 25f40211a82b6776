"""Every kind of planted leak is caught in a row; clean rows (RL and SFT) pass."""

from __future__ import annotations

import pytest
from leakage_fixtures import (
    CLEAN_BRIEF,
    HELDOUT_BRIEF,
    HELDOUT_ENTRIES,
    HELDOUT_QUESTION,
    PARAPHRASED_BRIEF,
    rl_row,
    sft_row,
)
from pydantic import BaseModel

from bat.config.leakage import LeakageConfig
from bat.leakage.index import build_index
from bat.leakage.scanner import Scanner, walk


def kinds(scan) -> set[str]:
    return {f.kind for f in scan.findings}


def test_clean_rows_pass(index):
    scanner = Scanner(index)
    for row, rl in ((rl_row("st-1"), True), (sft_row("sft-1"), False)):
        scan = scanner.scan_row(row, rl_row=rl)
        assert scan.findings == []
        assert scan.texts_checked >= 2
        assert scan.max_similarity < index.config.jaccard_threshold


def test_identifier_is_caught_case_insensitively_with_word_boundaries(index):
    scanner = Scanner(index)
    row = rl_row("st-1")
    row["prompt"][1]["content"] += " Compare with ORION-DET-0042 before you start."
    scan = scanner.scan_row(row, rl_row=True)
    assert kinds(scan) == {"identifier"}
    assert scan.findings[0].location == "prompt[1].content"
    assert scan.findings[0].source == "heldout:detection:0"
    glued = scanner.scan_row({"note": "orion-det-00421 and xorn_case_7781"})
    assert glued.findings == []


def test_identifier_in_a_key_is_caught(index):
    scan = Scanner(index).scan_row({"seeds": {"ORN_CASE_7781": 3}})
    assert [(f.kind, f.location) for f in scan.findings] == [("identifier", "seeds{ORN_CASE_7781}")]


def test_path_is_caught(index):
    scan = Scanner(index).scan_row({"observation": "opened grader/orion-det-0042/truth.npz (12 arrays)"})
    assert "path" in kinds(scan)


def test_long_answer_substring_and_short_answer_whole_value(index):
    scanner = Scanner(index)
    long = scanner.scan_row({"target": "The answer is: Left Lower Lobe Opacity."})
    assert kinds(long) == {"answer"}
    short = scanner.scan_row({"label": "b7"})
    assert kinds(short) == {"answer"}
    assert scanner.scan_row({"label": "B7 and more words"}).findings == []


def test_paraphrased_heldout_brief_is_a_near_duplicate(index):
    scan = Scanner(index).scan_row({"brief": PARAPHRASED_BRIEF})
    near = [f for f in scan.findings if f.kind == "near_duplicate"]
    assert len(near) == 1
    assert near[0].source == "heldout:detection:0:brief"
    assert scan.max_similarity >= index.config.jaccard_threshold


def test_paraphrase_inside_a_long_prompt_is_still_caught(index):
    long_text = CLEAN_BRIEF + " " + PARAPHRASED_BRIEF + " " + CLEAN_BRIEF
    scan = Scanner(index).scan_row({"prompt": [{"role": "user", "content": long_text}]})
    assert "near_duplicate" in kinds(scan)


def test_verbatim_heldout_text_runs_are_caught(index):
    scanner = Scanner(index)
    words = HELDOUT_BRIEF.split()
    spliced = CLEAN_BRIEF + " " + " ".join(words[10:19]) + " " + CLEAN_BRIEF
    assert "text_ngram" in kinds(scanner.scan_row({"note": spliced}))
    question = scanner.scan_row({"q": "Q: " + HELDOUT_QUESTION.upper()})
    assert "text_ngram" in kinds(question)


def test_eval_derived_fields_are_caught_as_keys_and_values(index):
    scanner = Scanner(index)
    assert kinds(scanner.scan_row({"provenance": {"controller_track_mean": 0.41}})) == {"eval_field"}
    assert kinds(scanner.scan_row({"meta": {"Heldout-Score": 0.3}})) == {"eval_field"}
    assert kinds(scanner.scan_row({"fields": ["ground_truth"]})) == {"eval_field"}
    assert kinds(scanner.scan_row({"note": "copied the reference_answer column"})) == {"eval_field"}


def test_credentials_are_caught_and_never_echoed(index):
    secret = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3"
    scan = Scanner(index).scan_row({"env": {"HF_TOKEN": secret}, "log": f"export TOKEN={secret}"})
    creds = [f for f in scan.findings if f.kind == "credential"]
    assert len(creds) >= 2
    assert all(secret not in f.matched for f in creds)
    assert all(secret not in f.model_dump_json() for f in scan.findings)


def test_machine_paths_are_caught_and_sandbox_paths_allowed(index):
    scanner = Scanner(index)
    scan = scanner.scan_row({"obs": 'Traceback: File "/home/alice/bat/run.py", line 3'})
    assert kinds(scan) == {"machine_path"}
    assert scanner.scan_row({"obs": "wrote /workspace/outputs/case_01.npy"}).findings == []
    assert kinds(scanner.scan_row({"obs": r"saved to C:\Users\bob\data.npy"})) == {"machine_path"}


def test_rl_rows_reject_assistant_turns_and_targets(index):
    scanner = Scanner(index)
    row = rl_row("st-1")
    row["prompt"].append({"role": "assistant", "content": "I will pilot first.", "name": None})
    row["target"] = "<tool_call>{}</tool_call>"
    scan = scanner.scan_row(row, rl_row=True)
    forbidden = [f for f in scan.findings if f.kind == "forbidden_field"]
    assert {f.location for f in forbidden} == {"prompt[2].role", "{target}"}
    assert scanner.scan_row(row, rl_row=False).findings == []


def test_pydantic_rows_and_walk_cover_keys_and_values(index):
    class Inner(BaseModel):
        note: str

    class Row(BaseModel):
        items: list[Inner]

    row = Row(items=[Inner(note="see orion-det-0042")])
    assert [loc for loc, *_ in walk(row)] == ["{items}", "items[0]{note}", "items[0].note"]
    assert kinds(Scanner(index).scan_row(row)) == {"identifier"}


def test_threshold_is_configurable():
    strict = build_index(HELDOUT_ENTRIES, LeakageConfig(jaccard_threshold=0.9, audit_floor=0.1))
    scan = Scanner(strict).scan_row({"brief": PARAPHRASED_BRIEF})
    assert "near_duplicate" not in kinds(scan)
    assert 0.3 <= scan.max_similarity < 0.9


def test_bad_config_cross_check_names_values():
    with pytest.raises(ValueError, match="audit_floor=0.5 must be <= leakage.jaccard_threshold=0.3"):
        LeakageConfig(audit_floor=0.5, jaccard_threshold=0.3)


def test_audit_floor_prefilter_never_hides_a_similarity_at_or_above_the_floor(config):
    from bat.leakage import text as T

    texts = [
        PARAPHRASED_BRIEF,
        CLEAN_BRIEF,
        HELDOUT_BRIEF[:150] + " " + CLEAN_BRIEF,
        HELDOUT_QUESTION + " " + CLEAN_BRIEF,
    ]
    filtered = build_index(HELDOUT_ENTRIES, config)
    unfiltered = build_index(HELDOUT_ENTRIES, config)
    every = set(unfiltered.shingle_union)
    for text in texts:
        for window in T.windows(T.words(text), config.window_words):
            every |= T.shingle_set(window, config.shingle_size)
    unfiltered.shingle_union = frozenset(every)
    for text in texts:
        a, b = Scanner(filtered).scan_row({"t": text}), Scanner(unfiltered).scan_row({"t": text})
        assert a.findings == b.findings
        if b.max_similarity >= config.audit_floor:
            assert a.max_similarity == b.max_similarity
