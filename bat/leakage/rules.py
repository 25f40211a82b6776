"""Index-free leak rules: credentials (token-looking strings) and machine-specific absolute paths.

Each detector takes one string and yields (start, end, label) spans; the scanner turns them into findings.
Credential text is never echoed: `redact` keeps only a short prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

CREDENTIAL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("openai_style_key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}")),
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("private_key", re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----")),
    ("bearer_token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    (
        "secret_assignment",
        re.compile(
            r"(?i:\b(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|token|password|passwd)\b"
            r"\s*[:=]\s*[\"']?[A-Za-z0-9._~+/@!#$%^&*-]{12,})"
        ),
    ),
)

SECRET_KEY_RE = re.compile(
    r"(?i)^(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|hf[_-]?token|token|password|passwd)$"
)
"""A dict key naming a secret: its string value (8+ non-space chars) is a credential."""

_ABS_PATH_RE = re.compile(r"(?<![\w.:/~\\#-])(/[\w.@+-]+(?:/[\w.@+-]+)+/?)")
"""An absolute POSIX path of 2+ components not glued to a word, URL, home (~), JSON-pointer (#) or Windows prefix."""
_FILE_URL_RE = re.compile(r"file://(/[^\s\"'<>]+)")
_WINDOWS_PATH_RE = re.compile(r"(?<![\w])([A-Za-z]:\\(?:[^\\\s\"'<>:|?*]+\\)*[^\\\s\"'<>:|?*]*)")


def find_credentials(text: str) -> Iterator[tuple[int, int, str]]:
    """Spans of token-looking strings in `text`, labelled by pattern name (separate passes measured
    faster than one alternation: each pattern keeps its literal-prefix scan)."""
    for label, pattern in CREDENTIAL_PATTERNS:
        for match in pattern.finditer(text):
            yield match.start(), match.end(), label


def secret_value(key: str, value: str) -> bool:
    """True when `key` names a secret and `value` looks like one (8+ chars, no spaces)."""
    stripped = value.strip()
    return bool(SECRET_KEY_RE.match(key)) and len(stripped) >= 8 and " " not in stripped


def redact(secret: str) -> str:
    """First 4 characters of a credential and its length; the rest never reaches a report."""
    return f"{secret[:4]}... ({len(secret)} chars, redacted)"


def find_machine_paths(text: str, allowed_prefixes: tuple[str, ...]) -> Iterator[tuple[int, int, str]]:
    """Spans of absolute paths (POSIX with 2+ components, file:// URLs, Windows drive paths) not under an
    allowed prefix (a prefix matches the path itself or the path followed by `/`)."""
    seen: set[int] = set()
    for pattern, group in ((_FILE_URL_RE, 1), (_ABS_PATH_RE, 1)):
        for match in pattern.finditer(text):
            start = match.start(group)
            if start in seen:
                continue
            seen.add(start)
            path = match.group(group)
            if not _allowed(path, allowed_prefixes):
                yield start, match.end(group), "posix_path"
    for match in _WINDOWS_PATH_RE.finditer(text):
        if len(match.group(1)) > 3:
            yield match.start(1), match.end(1), "windows_path"


def _allowed(path: str, prefixes: tuple[str, ...]) -> bool:
    for prefix in prefixes:
        if prefix.endswith("/"):
            if path.startswith(prefix):
                return True
        elif path == prefix or path.startswith(prefix + "/"):
            return True
    return False
