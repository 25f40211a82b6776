"""Fallback to the retained best (Eq. 6): c consecutive Overall drops, or KL(candidate || best) > tau."""

from __future__ import annotations

from bat.config.curriculum import FallbackConfig


def next_drop_counter(counter: int, overall: float, previous_overall: float | None) -> int:
    """c_{r+1} = c_r + 1 if M_{r+1} < M_r else 0 (M = controller Overall of consecutive evaluations)."""
    if previous_overall is None:
        return 0
    return counter + 1 if overall < previous_overall else 0


def fallback_reason(counter: int, kl: float | None, cfg: FallbackConfig) -> str | None:
    """Why the candidate is replaced by the best, or None when no trigger fires."""
    if counter >= cfg.patience:
        return f"{counter} consecutive Overall drops >= patience {cfg.patience}"
    if kl is not None and kl > cfg.kl_tau:
        return f"KL(candidate || best) = {kl:.4f} > tau {cfg.kl_tau}"
    return None
