"""Check, before building the image, that every version bat pins exists where it is installed from.

Usage: python scripts/check_pins.py [--repo DIR] [--json]
Reads containers/bat.def, pyproject.toml and scripts/bootstrap.sh (`bat.orchestrate.pins`), then asks each registry:
* every `name==version`: the index's PEP 691 JSON page (`https://pypi.org/simple/NAME/`; another `--index-url`, e.g.
  the PyTorch index, by its simple page), and for pins of bat's own environment whether a file of that version
  accepts the lowest Python `requires-python` allows;
* each engine line of the recipe: the engine's own `Requires-Dist` (read from its wheel's METADATA by HTTP range
  requests, without downloading the wheel) against the torch and transformers pinned beside it;
* the `From:` image: Docker Hub's tag API.
Prints one line per check: `ok`, `MISSING`/`INCOMPATIBLE` (exit 1), or `unverifiable` (the registry did not answer;
exit 0, but say so before building). Writes nothing.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bat.orchestrate.pins import (  # noqa: E402
    PYPI,
    Pin,
    of_version,
    python_problems,
    read_pins,
    requirement_problems,
)

TIMEOUT_S = 30
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"


class Unreachable(Exception):
    """The registry did not answer (network, proxy, DNS); the pin is unverifiable, not missing."""


def _get(url: str, accept: str | None = None, byte_range: str | None = None) -> bytes | None:
    """The body at `url`, None on 404; raises Unreachable on anything else."""
    headers = {"User-Agent": "bat-check-pins"}
    if accept:
        headers["Accept"] = accept
    if byte_range:
        headers["Range"] = f"bytes={byte_range}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise Unreachable(f"{url}: HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise Unreachable(f"{url}: {getattr(exc, 'reason', exc)}") from exc


def project_files(pin: Pin, cache: dict) -> list[dict] | None:
    """The index's files of the pin's project (PEP 691 dicts with `filename`, `url`, `requires-python`); None when
    the project does not exist. An HTML simple page (the PyTorch index) is read for file names only."""
    key = (pin.index, pin.name)
    if key not in cache:
        body = _get(f"{pin.index}/{pin.name}/", accept=f"{JSON_ACCEPT}, text/html;q=0.1")
        if body is None:
            cache[key] = None
        elif body.lstrip().startswith(b"{"):
            cache[key] = json.loads(body)["files"]
        else:
            names = re.findall(r">([^<>]+\.(?:whl|tar\.gz|zip))</a>", body.decode("utf-8", "replace"))
            cache[key] = [{"filename": name, "url": "", "requires-python": None} for name in names]
    return cache[key]


class _RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests (enough for zipfile to read one member of a wheel)."""

    def __init__(self, url: str, size: int):
        self.url, self.size, self.pos = url, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def readinto(self, buffer) -> int:
        if self.pos >= self.size:
            return 0
        end = min(self.size, self.pos + len(buffer)) - 1
        data = _get(self.url, byte_range=f"{self.pos}-{end}") or b""
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def wheel_requires(files: list[dict]) -> list[str]:
    """`Requires-Dist` lines of one Linux x86_64 (or pure) wheel of the version, from its METADATA."""
    wheels = [
        f for f in files if f["filename"].endswith(".whl") and ("x86_64" in f["filename"] or "-any" in f["filename"])
    ]
    if not wheels:
        return []
    chosen = wheels[0]
    size = chosen.get("size")
    if not size:
        request = urllib.request.Request(chosen["url"], method="HEAD")
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            size = int(response.headers["Content-Length"])
    archive = zipfile.ZipFile(io.BufferedReader(_RangeFile(chosen["url"], size), buffer_size=1 << 16))
    member = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    lines = archive.read(member).decode("utf-8", "replace").splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]


def check_base_image(image: str) -> tuple[str, str]:
    """(status, detail) of a `From:` docker image on Docker Hub."""
    name, _, tag = image.partition(":")
    namespace, _, repo = name.rpartition("/")
    url = f"https://hub.docker.com/v2/namespaces/{namespace or 'library'}/repositories/{repo}/tags/{tag or 'latest'}"
    try:
        found = _get(url, accept="application/json")
    except Unreachable as exc:
        return "unverifiable", f"Docker Hub did not answer ({exc})"
    return ("ok", "tag exists on Docker Hub") if found is not None else ("MISSING", "no such tag on Docker Hub")


def check(repo: Path) -> list[dict]:
    """Every finding: {what, status, detail}."""
    pins = read_pins(repo)
    cache: dict = {}
    results = []
    status, detail = check_base_image(pins.base_image)
    results.append({"what": f"From: {pins.base_image}", "status": status, "detail": detail})
    seen = set()
    version_files_of: dict[str, list[dict]] = {}
    for pin in pins.pins:
        key = (pin.name, pin.version, pin.index)
        if key in seen:
            continue
        seen.add(key)
        where = "PyPI" if pin.index == PYPI else pin.index
        what = f"{pin} ({pin.group}, from {where})"
        try:
            files = project_files(pin, cache)
        except Unreachable as exc:
            results.append({"what": what, "status": "unverifiable", "detail": str(exc)})
            continue
        matching = [f for f in files or [] if of_version(pin, f["filename"])]
        if not matching:
            why = "no such project" if files is None else f"no file of version {pin.version}"
            results.append({"what": what, "status": "MISSING", "detail": why})
            continue
        version_files_of[str(pin)] = matching
        wrong = (
            python_problems(pin, {f.get("requires-python") for f in matching}, pins.requires_python)
            if pin.group in ("bat", "dev")
            else []
        )
        status = "INCOMPATIBLE" if wrong else "ok"
        results.append({"what": what, "status": status, "detail": "; ".join(wrong) or f"{len(matching)} files"})
    for engine, table in pins.engines.items():
        what = f"engine {engine}: {' '.join(f'{n}=={v}' for n, v in table.items())}"
        files = version_files_of.get(f"{engine}=={table.get(engine)}")
        if not files:
            results.append({"what": what, "status": "unverifiable", "detail": "the engine's files were not listed"})
            continue
        try:
            problems = requirement_problems(engine, table, wheel_requires(files))
        except (Unreachable, OSError, zipfile.BadZipFile, StopIteration) as exc:
            results.append({"what": what, "status": "unverifiable", "detail": f"METADATA not read: {exc}"})
            continue
        status = "INCOMPATIBLE" if problems else "ok"
        detail = "; ".join(problems) or "torch and transformers satisfy the engine's own requirements"
        results.append({"what": what, "status": status, "detail": detail})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(REPO), help="checkout to read (default: this one)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    results = check(Path(args.repo))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            print(f"{r['status']:<13} {r['what']}: {r['detail']}")
    bad = [r for r in results if r["status"] in ("MISSING", "INCOMPATIBLE")]
    unverifiable = [r for r in results if r["status"] == "unverifiable"]
    print(f"{len(bad)} missing or incompatible, {len(unverifiable)} unverifiable, {len(results)} checked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
