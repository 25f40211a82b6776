"""Deterministic tiny policy: byte-level BPE trained offline + random-init Qwen3, saved in HF format.

Same config, seed and corpus -> byte-identical `tokenizer.json` and `model.safetensors`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.config.model import TinyModelConfig
from bat.policy.chat import CHAT_TEMPLATE, ENDOFTEXT, IM_END, IM_START
from bat.policy.codec import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from bat.state.atomic import atomic_dir, atomic_write_json
from bat.state.model_files import MODEL_RECORD_NAME

SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
"""Control tokens (skipped by `decode(skip_special_tokens=True)`)."""
ADDED_TOKENS = (TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
"""Single-token markers of the tool-call format that stay visible when decoding."""
BUILDER_VERSION = 3
"""2: the default corpus adds practice-episode text (`bat.policy.practice_text`); 3: optional copy pretraining."""


def train_tokenizer(corpus: list[str], vocab_size: int) -> Any:
    """Train a byte-level BPE on `corpus` and wrap it as a transformers fast tokenizer with the chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer=trainer)
    core.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        bos_token=None,
        unk_token=None,
        padding_side="left",
        model_max_length=1_000_000,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def qwen3_config(cfg: TinyModelConfig, tokenizer: Any) -> Any:
    """A Qwen3 config of the tiny shape; vocab = tokenizer length."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.hidden_size // cfg.num_heads,
        max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=cfg.tie_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        use_cache=True,
    )


def count_parameters(model: Any) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


def build_tiny_model(out_dir: str | Path, cfg: TinyModelConfig, seed: int, *, corpus: list[str] | None = None) -> Path:
    """Write an HF model directory at `out_dir` (atomically): tokenizer, chat template, random Qwen3 weights,
    copy-pretrained when `cfg.copy_pretrain.steps` > 0 (`bat.policy.copy_pretrain`)."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    from bat.policy.corpus import tokenizer_corpus

    texts = corpus if corpus is not None else tokenizer_corpus(seed=seed)
    tokenizer = train_tokenizer(texts, cfg.vocab_size)
    config = qwen3_config(cfg, tokenizer)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    pretrain: dict[str, float] = {}
    if cfg.copy_pretrain.steps:
        from bat.policy.copy_pretrain import copy_pretrain, identifier_ids, ordinary_tokens

        in_text = any(stage.kind != "random" for stage in cfg.copy_pretrain.stages)
        stream = (
            [i for text in texts for i in tokenizer(text, add_special_tokens=False)["input_ids"]] if in_text else None
        )
        pretrain = copy_pretrain(
            model,
            ordinary_tokens(tokenizer),
            cfg.copy_pretrain,
            seed,
            progress=_print_progress,
            stream=stream,
            name_ids=identifier_ids(tokenizer),
        )
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id, do_sample=False
    )
    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        atomic_write_json(
            tmp / MODEL_RECORD_NAME,
            {
                "builder": "bat.policy.tiny",
                "builder_version": BUILDER_VERSION,
                "seed": seed,
                "tiny": cfg.model_dump(mode="json"),
                "parameters": count_parameters(model),
                "corpus_texts": len(texts),
                "copy_pretrain": pretrain,
            },
        )
    return out


def _print_progress(summary: dict[str, float]) -> None:
    print(
        f"copy pretraining: step {summary['steps']} (vocab {summary['vocab']}, length {summary['seq_len']}): "
        f"copy loss {summary['loss']:.3f} nats, {summary['seconds']:.0f} s",
        flush=True,
    )
