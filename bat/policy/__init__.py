"""Policy side of bat: load an HF causal LM offline, build the deterministic tiny model, tool-call codec.

Public API (stable; the other packages code against it):

* `bat.policy.codec`
    - `TOOL_CALL_OPEN = "<tool_call>"`, `TOOL_CALL_CLOSE = "</tool_call>"`; an assistant turn holds
      free text followed by at most one block
      `<tool_call>{"name": "...", "arguments": {...}}</tool_call>`.
    - `ToolCall(name: str, arguments: dict)`  (pydantic; `.as_dict() -> {"name", "arguments"}`)
    - `InvalidAction(reason: str, raw: str, detail: str)`  reason in `INVALID_REASONS`
      (`no_tool_call`, `unclosed_tool_call`, `bad_json`, `not_an_object`, `missing_name`,
      `bad_arguments`, `multiple_tool_calls`, `unknown_tool`); `.as_dict()` gives an invalid-action
      record the benchmark env turns into an error observation.
    - `parse_tool_call(text, tool_names=None) -> ToolCall | InvalidAction`  (never raises)
    - `render_tool_call(call, thought="") -> str`  (inverse of parse: parse(render(c)) == c)
* `bat.policy.loader`
    - `load_policy(path, *, dtype="float32", device="cpu") -> Policy`  (offline only: sets
      `local_files_only`; a missing path raises FileNotFoundError naming the expected files)
    - `load_model(path, *, dtype, device)`, `load_tokenizer(path)`, `check_model_dir(path)`;
      `Policy(model, tokenizer, path)` dataclass
* `bat.policy.tiny`
    - `build_tiny_model(out_dir, cfg: ModelConfig, seed: int, *, corpus=None) -> Path`
      writes an HF directory (config.json, model.safetensors, tokenizer.json,
      tokenizer_config.json, chat_template.jinja, bat_model.json); same seed -> same bytes.
      `<tool_call>`/`</tool_call>` are single added tokens that survive `skip_special_tokens`.
* `bat.policy.chat`
    - `CHAT_TEMPLATE` (ChatML-style jinja; roles system/user/assistant/tool; assistant
      messages may carry `tool_calls=[{"name","arguments"}]` or `{"function": {...}}`; `tools=`
      renders the tool list into the system turn)
    - `render_messages(tokenizer, messages, tools=None, add_generation_prompt=False) -> str`
    - `encode_messages(tokenizer, messages, tools=None) -> (ids, loss_mask)`: loss mask is 1 on
      the tokens of the LAST assistant message (its content + end-of-turn token), 0 elsewhere;
      context and target are tokenized separately and concatenated (token in, token out).
    - `encode_prompt(tokenizer, messages, tools=None) -> ids` (context + `<|im_start|>assistant\n`),
      `encode_text(tokenizer, text) -> ids`; tokens `IM_START`, `IM_END` (= eos), `ENDOFTEXT` (= pad).
* `bat.policy.corpus`: `tokenizer_corpus(extra=None, seed=0, *, practice=True) -> list[str]` (tool language
  + observations from `bat.benchmark` when importable, a fixed corpus of text shipped with Python and, with
  `practice`, `bat.policy.practice_text.practice_texts(seed)`: briefs, responses and observations of scripted
  expert/recovery episodes on practice instances only, in-process, seeded from `seed`).

Config: `bat.config.model.ModelConfig` (`path` to a local HF model, or tiny-builder settings).
CLI: `bat model build-tiny --out DIR [--preset config|tiny|10m] [--config YAML] [--set k=v] [--seed N]`.
"""
