"""Data for the leakage tests: a small held-out fingerprint set and bank rows in the published shapes.

The held-out side and the bank rows below are written by hand in the shapes the benchmark and bank teams
publish (fingerprint entries; MANIFEST.json, rl/rows.jsonl, sft/*.jsonl, states/<id>/files/...).
"""

from __future__ import annotations

from typing import Any

HELDOUT_BRIEF = (
    "You are given twelve chest radiographs from the Orion cohort. Detect bright nodular findings and submit "
    "bounding boxes in the predictions.json contract. Use the model card of lumen-det-v2 and normalise "
    "intensities to the unit range before inference, then pilot on one case before the full batch."
)
PARAPHRASED_BRIEF = (
    "We give you 12 chest radiographs of the Orion cohort. Detect the bright nodular findings and submit "
    "bounding boxes following the predictions.json contract. Use lumen-det-v2's model card and normalise the "
    "intensities to unit range before running inference, then pilot one case before the whole batch."
)
HELDOUT_QUESTION = "Which lobe of the left lung carries the largest opacity in the Orion radiograph series?"
HELDOUT_ENTRIES: list[tuple[str, str, str]] = [
    ("identifier", "orion-det-0042", "heldout:detection:0"),
    ("identifier", "ORN_CASE_7781", "heldout:detection:0:case"),
    ("path", "grader/orion-det-0042/truth.npz", "heldout:detection:0:path"),
    ("answer", "left lower lobe opacity", "heldout:vqa:3:answer"),
    ("answer", "B7", "heldout:vqa:4:answer"),
    ("text", HELDOUT_BRIEF, "heldout:detection:0:brief"),
    ("text", HELDOUT_QUESTION, "heldout:vqa:3:question"),
    ("field", "controller_track_mean", "heldout:eval:field"),
]

CLEAN_BRIEF = (
    "This practice task holds eight hand x-rays from the Vega set. Locate the dense spots and write boxes to "
    "the output file described in task/spec.json. The card of kestrel-find-v1 says to scale pixel values to "
    "zero-one before running it; check a single case first and look at the output before the full run."
)
SKILL = (
    "S3 Validate: run the chosen model on one small case first, check the output shape, value range and that "
    "it is not degenerate; if it fails, diagnose, fix the preprocessing and pilot again before the batch."
)


def rl_row(state_id: str, brief: str = CLEAN_BRIEF) -> dict[str, Any]:
    """An RL row shaped like `bat.schemas.bank.BankRow` (no assistant turns, no answers)."""
    return {
        "schema_version": 1,
        "state_id": state_id,
        "stage": "S3",
        "track": "detection",
        "outcome": "recovery",
        "reward_source": "stage_rubric",
        "task": {
            "schema_version": 1,
            "task_id": "prac-det-0007",
            "track": "detection",
            "seed": 7,
            "variant": "recovery",
            "reduction": None,
        },
        "state": {"path": f"states/{state_id}", "digest": "sha256:" + "ab" * 32, "files": 3, "bytes": 2048},
        "prompt": [
            {"role": "system", "content": SKILL, "name": None},
            {"role": "user", "content": brief + "\nHand-off: the setup stage loaded kestrel-find-v1.", "name": None},
        ],
        "rubric": [{"id": "s3a_pilot_before_batch", "stage": "S3", "text": "pilot on a small case"}],
        "evidence": [{"id": "pilot_record", "stage": "S3", "text": "execution record of the pilot"}],
        "skill": SKILL,
        "provenance": {
            "source": "practice:detection",
            "generator": "bat.bank",
            "generator_version": "1",
            "teacher": "scripted:recovery",
            "seeds": {"task": 7},
            "reduction": None,
            "trajectory_id": "traj-0007",
            "prefix_turns": 4,
            "digests": {},
        },
    }


def sft_row(
    row_id: str, target: str = '<tool_call>{"name": "run_model", "arguments": {"cases": ["case_01"]}}</tool_call>'
) -> dict[str, Any]:
    """An SFT row shaped like `bat.schemas.bank.SftRow` (assistant target allowed here)."""
    return {
        "schema_version": 1,
        "row_id": row_id,
        "trajectory_id": "traj-0007",
        "task_id": "prac-det-0007",
        "track": "detection",
        "stage": "S3",
        "outcome": "recovery",
        "turn": 3,
        "messages": [
            {"role": "system", "content": SKILL, "name": None},
            {"role": "user", "content": CLEAN_BRIEF, "name": None},
            {
                "role": "tool",
                "content": "loaded kestrel-find-v1 (ok) from /workspace/models/kestrel.json",
                "name": "load_model",
            },
        ],
        "target": target,
        "loss_mask": {"kind": "target_only", "context_messages": 3},
        "length": 180,
        "length_unit": "approx_tokens",
        "split": "train",
    }


# Planted leaks: each edits the file map of `make_bank` (see conftest) to add one leak of its kind.


def plant_identifier(files):
    files["rl/rows.jsonl"][1]["prompt"][1]["content"] += " Reuse the layout of orion-det-0042."


def plant_path(files):
    files["sft/train.jsonl"][0]["messages"][2]["content"] = "read grader/orion-det-0042/truth.npz"


def plant_answer(files):
    files["sft/train.jsonl"][1]["target"] = "Final answer: left lower lobe opacity"


def plant_paraphrase(files):
    files["states/st-0001/files/task/README.md"] = PARAPHRASED_BRIEF


def plant_eval_field(files):
    files["rl/rows.jsonl"][0]["provenance"]["digests"] = {"controller_track_mean": "0.41"}


def plant_question(files):
    files["tasks.jsonl"][0]["variant"] = HELDOUT_QUESTION


def plant_machine_path(files):
    files["sft/train.jsonl"][0]["messages"][2]["content"] = "Traceback: /home/ci/bat/.venv/lib/x.py"


def plant_rl_target(files):
    files["rl/rows.jsonl"][0]["prompt"].append({"role": "assistant", "content": "ok", "name": None})


def plant_file_name(files):
    files["states/st-0001/files/data/ORN_CASE_7781.npy"] = b"\x00\x01"


PLANTS = {
    "identifier": plant_identifier,
    "path": plant_path,
    "answer": plant_answer,
    "near_duplicate": plant_paraphrase,
    "eval_field": plant_eval_field,
    "text_ngram": plant_question,
    "machine_path": plant_machine_path,
    "forbidden_field": plant_rl_target,
}
