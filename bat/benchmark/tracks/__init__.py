"""Registry of the seven built-in tracks; `get_track(name)` imports only that track (sandboxed tool calls stay
light) and raises listing the valid names."""

from __future__ import annotations

import importlib

from bat.benchmark.tracks.base import CaseData, Track

_CLASSES = {
    "classification": "bat.benchmark.tracks.classification:Classification",
    "detection": "bat.benchmark.tracks.detection:Detection",
    "enhancement": "bat.benchmark.tracks.enhancement:Enhancement",
    "report": "bat.benchmark.tracks.report:Report",
    "segmentation": "bat.benchmark.tracks.segmentation:Segmentation",
    "synthesis": "bat.benchmark.tracks.synthesis:Synthesis",
    "vqa": "bat.benchmark.tracks.vqa:Vqa",
}
TRACKS: tuple[str, ...] = tuple(_CLASSES)
_CACHE: dict[str, Track] = {}


def get_track(name: str) -> Track:
    """The track object named `name`."""
    if name not in _CLASSES:
        raise ValueError(f"unknown track {name!r}; valid: {list(TRACKS)}")
    if name not in _CACHE:
        module, cls = _CLASSES[name].split(":")
        _CACHE[name] = getattr(importlib.import_module(module), cls)()
    return _CACHE[name]


__all__ = ["TRACKS", "CaseData", "Track", "get_track"]
