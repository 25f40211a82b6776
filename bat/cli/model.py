"""`bat model import|build-tiny|install-template|diff`: named pretrained policies converted from installed packages,
the deterministic offline tiny policy, bat's chat template for a foreign model folder, and how far one checkpoint
moved from another."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    from bat.cli.config import add_config_arguments
    from bat.policy.pretrained import REGISTRY

    parser = subparsers.add_parser("model", help="policy models: import a pretrained one, build the tiny one")
    sub = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    imp = sub.add_parser("import", help="convert a named pretrained model from its installed package to an HF folder")
    imp.add_argument("name", choices=sorted(REGISTRY), help="registered pretrained model")
    imp.add_argument(
        "--out",
        default=None,
        help="output folder (default: the model cache, $BAT_MODEL_CACHE or ~/.cache/bat/models/NAME); "
        "a folder already holding this conversion is reused",
    )
    imp.set_defaults(handler=_import)
    template = sub.add_parser("install-template", help="install bat's tool-rendering chat template into a model folder")
    template.add_argument("folder", help="local HF model folder")
    template.set_defaults(handler=_install_template)
    build = sub.add_parser("build-tiny", help="train the byte-level BPE and write a random-init Qwen3 HF directory")
    build.add_argument("--out", required=True, help="output directory (replaced atomically)")
    build.add_argument(
        "--preset",
        choices=["config", "tiny", "10m"],
        default="config",
        help="shape: `config` = model.tiny from --config/--set; `tiny` ~3.7M; `10m` ~11M parameters",
    )
    build.add_argument("--seed", type=int, default=None, help="weights seed (default: run.seed)")
    add_config_arguments(build)
    build.set_defaults(handler=_build_tiny)
    diff = sub.add_parser("diff", help="how far checkpoint B's weights (and, with --kl-state, its policy) moved from A")
    diff.add_argument("a", help="reference HF model folder (e.g. the SFT export)")
    diff.add_argument("b", help="HF model folder of the same model (e.g. a GRPO export)")
    diff.add_argument(
        "--kl-state",
        default=None,
        help="also measure KL(B || A) per token on this run state directory's KL probe rows (training-side bank "
        "rows, rendered as its rollouts render them; loads both models)",
    )
    diff.set_defaults(handler=_diff)


def _diff(args: argparse.Namespace) -> int:
    from bat.policy.weight_diff import weight_diff

    print(f"B {args.b} against A {args.a}")
    print(weight_diff(args.a, args.b).line(), flush=True)
    if args.kl_state:
        from bat.curriculum.kl_between import checkpoint_kl

        estimate = checkpoint_kl(args.kl_state, args.b, args.a)
        interval = f" +- {estimate.half_width:.3g} (95%, across chunks)" if estimate.half_width is not None else ""
        print(
            f"KL(B || A) {estimate.mean:.4g}{interval} per token over {estimate.tokens} sampled tokens of {estimate.prompts} probe prompts"
        )
    return 0


def _build_tiny(args: argparse.Namespace) -> int:
    from bat.config import load_config
    from bat.config.model import TINY_PRESETS
    from bat.policy.tiny import build_tiny_model
    from bat.state.model_files import read_build_info

    cfg = load_config(args.config, args.overrides)
    shape = cfg.model.tiny if args.preset == "config" else TINY_PRESETS[args.preset]
    seed = cfg.run.seed if args.seed is None else args.seed
    out = build_tiny_model(args.out, shape, seed)
    info = read_build_info(out)
    print(f"built {out}: {info['parameters']:,} parameters, vocab {shape.vocab_size}, seed {seed}")
    return 0


def _import(args: argparse.Namespace) -> int:
    import time

    from bat.config.load import ConfigError
    from bat.policy.pretrained import PretrainedUnavailable, import_pretrained, read_record
    from bat.state.layout import pretrained_model_dir

    out = args.out if args.out else pretrained_model_dir(args.name)
    started = time.perf_counter()
    try:
        folder = import_pretrained(args.name, out)
    except PretrainedUnavailable as exc:
        raise ConfigError(str(exc)) from None
    record = read_record(folder)
    print(
        f"{args.name}: {folder} ({record['parameters']:,} parameters, {record['positions']} positions, "
        f"source {record['source_package']} {record['source_version']}, output sha256 {record['output_sha256']}, "
        f"{time.perf_counter() - started:.1f} s)"
    )
    return 0


def _install_template(args: argparse.Namespace) -> int:
    from bat.config.load import ConfigError
    from bat.policy.loader import install_chat_template, load_tokenizer

    try:
        folder = install_chat_template(args.folder)
        load_tokenizer(folder)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    print(f"installed bat's chat template into {folder}")
    return 0
