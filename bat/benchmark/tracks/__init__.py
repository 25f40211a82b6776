"""Registry of the seven built-in tracks; `get_track(name)` raises listing the valid names."""

from __future__ import annotations

from bat.benchmark.tracks.base import CaseData, Track
from bat.benchmark.tracks.classification import Classification
from bat.benchmark.tracks.detection import Detection
from bat.benchmark.tracks.enhancement import Enhancement
from bat.benchmark.tracks.report import Report
from bat.benchmark.tracks.segmentation import Segmentation
from bat.benchmark.tracks.synthesis import Synthesis
from bat.benchmark.tracks.vqa import Vqa

_REGISTRY: dict[str, Track] = {t.name: t for t in (Classification(), Detection(), Enhancement(), Report(), Segmentation(), Synthesis(), Vqa())}
TRACKS: tuple[str, ...] = tuple(_REGISTRY)


def get_track(name: str) -> Track:
    """The track object named `name`."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown track {name!r}; valid: {list(TRACKS)}")
    return _REGISTRY[name]


__all__ = ["CaseData", "TRACKS", "Track", "get_track"]
