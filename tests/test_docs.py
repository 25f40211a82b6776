"""The README is a short front door and the docs pages hold the rest: its length, the two commands, the pointer to
what is mocked, and every relative link in README.md and docs/*.md (files and in-page anchors) resolving."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
# Links into these folders are not checked: docs/images/ holds pictures committed by hand, docs/results/ is written
# by experiments.
UNCHECKED = (DOCS / "images", DOCS / "results")
MAX_README_LINES = 150

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The page without code blocks and inline code (brackets there are command syntax, not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text(encoding="utf-8")))


def _is_external(target: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE))


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    slugs = set()
    for title in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        plain = re.sub(r"[`*_]", "", title).strip().lower()
        slugs.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", plain)))
    return slugs


def _unchecked(path: Path) -> bool:
    return any(path == folder or folder in path.parents for folder in UNCHECKED)


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines, at most {MAX_README_LINES}"


def test_readme_names_the_two_commands_and_what_is_mocked():
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text
    assert "make test" in text
    assert "mocked" in text.lower()
    assert "docs/mocks.md" in _links(README)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    broken = []
    for target in _links(page):
        if _is_external(target):
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page.resolve()
        if _unchecked(resolved):
            continue
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading #{anchor})")
    assert not broken, f"{page.relative_to(ROOT)}: " + ", ".join(broken)


def test_pages_link_somewhere():
    """The link pattern still finds links (a regex that matched nothing would pass the check above vacuously)."""
    assert len(_links(README)) >= 10
