"""`bat model build-tiny`: write the deterministic offline tiny policy (tokenizer + random Qwen3) to a directory."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    from bat.cli.config import add_config_arguments

    parser = subparsers.add_parser("model", help="policy models: build the offline tiny model")
    sub = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    build = sub.add_parser("build-tiny", help="train the byte-level BPE and write a random-init Qwen3 HF directory")
    build.add_argument("--out", required=True, help="output directory (replaced atomically)")
    build.add_argument("--preset", choices=["config", "tiny", "10m"], default="config",
                       help="shape: `config` = model.tiny from --config/--set; `tiny` ~3.7M; `10m` ~11M parameters")
    build.add_argument("--seed", type=int, default=None, help="weights seed (default: run.seed)")
    add_config_arguments(build)
    build.set_defaults(handler=_build_tiny)


def _build_tiny(args: argparse.Namespace) -> int:
    from bat.config import load_config
    from bat.config.model import TINY_PRESETS
    from bat.policy.tiny import build_tiny_model, read_build_info

    cfg = load_config(args.config, args.overrides)
    shape = cfg.model.tiny if args.preset == "config" else TINY_PRESETS[args.preset]
    seed = cfg.run.seed if args.seed is None else args.seed
    out = build_tiny_model(args.out, shape, seed)
    info = read_build_info(out)
    print(f"built {out}: {info['parameters']:,} parameters, vocab {shape.vocab_size}, seed {seed}")
    return 0
