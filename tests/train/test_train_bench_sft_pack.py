"""`bat bench sft_pack` prints the corpus x packing token figures (timing skipped at test size)."""

from __future__ import annotations

from bat.cli.main import main


def test_bench_sft_pack_prints_token_figures(capsys):
    code = main(["bench", "sft_pack", "--tracks", "vqa", "--time-trajectories", "0"])
    assert code == 0
    out = capsys.readouterr().out
    assert "tokens/row" in out and "epoch tokens packed" in out
    lines = [line for line in out.splitlines() if "│     base" in line or "│ practice" in line]
    assert len(lines) == 2
    base_ratio, practice_ratio = (float(line.split("│")[-2]) for line in lines)
    assert base_ratio == 1.0 and practice_ratio < 1.0, lines
    packed_share = [float(line.split("│")[-3]) for line in lines]
    assert all(0 < share < 1 for share in packed_share), lines
