"""Domain-shift detector: tracks that collapse while the mean of tracks holds mean the policy is drifting
toward its practice distribution at the expense of part of the held-out suite (aggregate numbers only)."""

from __future__ import annotations

from bat.schemas.routing import DomainShift, ScoreSnapshot


def detect_domain_shift(previous: ScoreSnapshot | None, current: ScoreSnapshot, track_drop: float) -> DomainShift:
    """Compare per-track Overall means with the previous evaluation; flag tracks dropping >= `track_drop`
    while the mean delta over tracks is >= 0, or a changed track set."""
    if previous is None:
        return DomainShift(detected=False, reason="no previous evaluation")
    if set(previous.tracks) != set(current.tracks):
        return DomainShift(
            detected=True, reason=f"track set changed: {sorted(previous.tracks)} -> {sorted(current.tracks)}"
        )
    deltas = {t: current.tracks[t] - previous.tracks[t] for t in sorted(current.tracks)}
    mean = sum(deltas.values()) / len(deltas) if deltas else 0.0
    shifted = [t for t, d in deltas.items() if d <= -track_drop + 1e-9]
    if shifted and mean >= 0.0:
        reason = f"tracks {shifted} dropped >= {track_drop:.2f} while the track mean moved {mean:+.4f}"
        return DomainShift(detected=True, reason=reason, track_deltas=deltas, shifted_tracks=shifted)
    return DomainShift(
        detected=False, reason="per-track deltas consistent", track_deltas=deltas, shifted_tracks=shifted
    )
