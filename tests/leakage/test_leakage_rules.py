"""Index-free rules: credential patterns and machine-specific paths, with their false-positive guards."""

from __future__ import annotations

from bat.leakage.rules import find_credentials, find_machine_paths, redact, secret_value

ALLOWED = ("/workspace", "/dev/null", "/usr/bin/")


def labels(text: str) -> list[str]:
    return [label for _, _, label in find_credentials(text)]


def test_credential_patterns():
    assert labels("key AKIAABCDEFGHIJKLMNOP here") == ["aws_access_key"]
    assert labels("ghp_" + "a1" * 18) == ["github_token"]
    assert labels("Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345") == ["bearer_token"]
    assert labels("-----BEGIN RSA PRIVATE KEY-----") == ["private_key"]
    assert labels("password = Tr0ub4dor&3horse") == ["secret_assignment"]


def test_no_credentials_in_ordinary_bank_text():
    for text in (
        "sha256:" + "ab" * 32,
        "max_tokens: 2048",
        "token_ids are stored with a loss mask",
        "the password field is empty",
        "state_id st-0001 digest 9f86d081884c7d659a2feaa0c55ad015",
    ):
        assert labels(text) == [], text


def test_secret_keys_and_redaction():
    assert secret_value("HF_TOKEN", "hf_abcdefgh1234")
    assert not secret_value("HF_TOKEN", "")
    assert not secret_value("token_count", "1234567890")
    assert redact("hf_abcdefgh1234") == "hf_a... (15 chars, redacted)"


def test_machine_paths_found():
    text = 'File "/home/alice/proj/run.py", see file:///scratch/u1/out and /tmp/bat-ws-81/case.npy'
    found = [text[s:e] for s, e, _ in find_machine_paths(text, ALLOWED)]
    assert found == ["/scratch/u1/out", "/home/alice/proj/run.py", "/tmp/bat-ws-81/case.npy"]


def test_machine_path_false_positive_guards():
    for text in (
        "and/or 3/4 km/h 2024/01/02",
        "see https://example.org/a/b/c",
        "wrote /workspace/outputs/a.npy and /workspace",
        "/usr/bin/python3 -V > /dev/null",
        "stages S1/S2/S3",
        "the root / and a single /tmp",
        '{"$ref": "#/definitions/ToolCall"}',
    ):
        assert list(find_machine_paths(text, ALLOWED)) == [], text
