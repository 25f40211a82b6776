"""Engines: hf batched == one-at-a-time per seed, sampling filters, openai client against a local server."""

from __future__ import annotations

import pytest
import torch
from fake_openai import CompletionsServer

from bat.config.rollout import OpenAIEngineConfig, RolloutConfig
from bat.policy.loader import load_model
from bat.rollout.engine import GenRequest
from bat.rollout.engine_hf import HFEngine, filter_logits
from bat.rollout.engine_openai import OpenAIEngine
from bat.rollout.engines import make_engine


def requests_for(n: int) -> list[GenRequest]:
    return [
        GenRequest(
            prompt_ids=list(range(10, 14 + 3 * i)),
            max_new_tokens=6 + 4 * i,
            seed=100 + i,
            temperature=0.9,
            stop_ids=(2,),
        )
        for i in range(n)
    ]


def test_hf_batched_equals_one_at_a_time(tiny_model):
    engine = HFEngine(tiny_model, max_batch=8)
    reqs = requests_for(4)
    batched = engine.generate(reqs)
    for req, got in zip(reqs, batched):
        alone = engine.generate([req])[0]
        assert alone.token_ids == got.token_ids
        assert alone.logprobs == pytest.approx(got.logprobs, abs=1e-4)
        assert len(got.token_ids) <= req.max_new_tokens and got.finish in ("stop", "length")
        assert all(lp <= 0.0 for lp in got.logprobs)


def test_hf_finished_requests_leave_the_batch(tiny_model):
    engine = HFEngine(tiny_model, max_batch=8)
    rows = []
    engine.model.register_forward_pre_hook(lambda _m, _a, kw: rows.append(kw["input_ids"].shape[0]), with_kwargs=True)
    reqs = [GenRequest(prompt_ids=list(range(n, 20)), max_new_tokens=n, seed=n, temperature=1.0) for n in (2, 5, 9)]
    got = engine.generate(reqs)
    assert [len(g.token_ids) for g in got] == [2, 5, 9]
    assert rows == [3, 3, 2, 2, 2, 1, 1, 1, 1]  # a forward per sampled token, over the requests still generating
    assert [g.token_ids for g in got] == [engine.generate([r])[0].token_ids for r in reqs]


def test_hf_requests_with_one_prompt_prefill_it_once(tiny_model):
    engine = HFEngine(tiny_model, max_batch=8)
    fed = []
    engine.model.register_forward_pre_hook(
        lambda _m, _a, kw: fed.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    group = [GenRequest(prompt_ids=list(range(10, 30)), max_new_tokens=4, seed=k, temperature=1.0) for k in range(4)]
    other = GenRequest(prompt_ids=list(range(50, 62)), max_new_tokens=4, seed=9, temperature=1.0)
    got = engine.generate([*group, other])
    assert fed[0] == (2, 20)  # the shared prompt once, the other prompt (left-padded) once
    assert fed[1:] == [(5, 1)] * 3
    assert len({tuple(g.token_ids) for g in got[:4]}) > 1  # each member still samples with its own seed
    assert [g.token_ids for g in got] == [engine.generate([r])[0].token_ids for r in [*group, other]]


def test_hf_prompts_that_open_alike_prefill_the_shared_prefix_once(tiny_model):
    from bat.rollout.engine_hf import MIN_SHARED_PREFIX

    engine = HFEngine(tiny_model, max_batch=8)
    fed = []
    engine.model.register_forward_pre_hook(
        lambda _m, _a, kw: fed.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    system = list(range(100, 100 + MIN_SHARED_PREFIX + 8))  # one opening (system prompt, tools) for every task
    tails = [list(range(300, 305)), list(range(400, 412)), list(range(500, 509))]
    reqs = [
        GenRequest(prompt_ids=system + tail, max_new_tokens=5, seed=k, temperature=1.0) for k, tail in enumerate(tails)
    ]
    reqs.append(GenRequest(prompt_ids=system + tails[1], max_new_tokens=5, seed=7, temperature=1.0))  # K = 2
    got = engine.generate(reqs)
    assert fed[0] == (1, len(system))  # the shared opening once
    assert fed[1] == (3, len(tails[1]))  # then each distinct tail once, left-padded to the longest
    assert fed[2:] == [(4, 1)] * 4
    for req, res in zip(reqs, got):
        alone = engine.generate([req])[0]
        assert alone.token_ids == res.token_ids
        assert alone.logprobs == pytest.approx(res.logprobs, abs=1e-4)


def test_reserved_cache_appends_in_place_and_decodes_like_a_dynamic_cache(tiny_model):
    from transformers import DynamicCache

    from bat.rollout.kvcache import ReservedCache

    model = load_model(tiny_model)
    ids = torch.tensor([list(range(10, 30)), list(range(40, 60))])
    caches = {"dynamic": DynamicCache(), "reserved": ReservedCache(model.config.num_hidden_layers, reserve=4)}
    logits = {}
    with torch.inference_mode():
        for name, cache in caches.items():
            steps = [model(input_ids=ids[:, :16], past_key_values=cache, use_cache=True).logits[:, -1]]
            buffer = cache.layers[0]._keys.data_ptr() if name == "reserved" else None
            for t in range(16, 20):  # four decode steps fit the reserve: no reallocation
                steps.append(model(input_ids=ids[:, t : t + 1], past_key_values=cache, use_cache=True).logits[:, -1])
            if name == "reserved":
                assert cache.layers[0]._keys.data_ptr() == buffer and cache.get_seq_length() == 20
            cache.batch_select_indices(torch.tensor([1]))
            steps.append(model(input_ids=ids[1:, :1], past_key_values=cache, use_cache=True).logits[:, -1])
            logits[name] = steps
    assert caches["reserved"].get_seq_length() == 21 and caches["reserved"].layers[0].keys.shape[0] == 1
    for a, b in zip(logits["dynamic"], logits["reserved"]):
        assert torch.allclose(a, b, atol=1e-5)


def test_hf_set_weights_swaps_model_and_greedy_is_deterministic(tiny_model):
    engine = HFEngine(tiny_model)
    req = GenRequest(prompt_ids=[5, 6, 7], max_new_tokens=5, seed=1, temperature=0.0)
    a = engine.generate([req])[0]
    old = engine.model
    engine.set_weights(tiny_model)
    assert engine.model is not old and engine.checkpoint == str(tiny_model)
    assert engine.generate([req])[0].token_ids == a.token_ids
    with pytest.raises(FileNotFoundError, match="config.json"):
        engine.set_weights(tiny_model.parent)


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isinf(filter_logits(logits, 1.0, 2)[0, 2:]).all()
    kept = ~torch.isinf(filter_logits(logits, 0.7, 0)[0])
    assert kept.tolist() == [True, True, False, False]


def test_make_engine_rejects_unknown_and_builds_openai():
    cfg = RolloutConfig(engine="openai", openai=OpenAIEngineConfig(verify_checkpoint=False))
    assert isinstance(make_engine(cfg, "ckpt"), OpenAIEngine)
    with pytest.raises(ValueError):
        RolloutConfig(engine="sglang-native")


def test_openai_engine_token_ids_roundtrip(tiny_model):
    local = HFEngine(tiny_model)
    reqs = requests_for(3)
    with CompletionsServer(local) as srv:
        engine = OpenAIEngine(OpenAIEngineConfig(base_url=srv.url, model="policy", concurrency=3), checkpoint="ck")
        got = engine.generate(reqs)
        sent = srv.requests[0]
    want = local.generate(reqs)
    assert [g.token_ids for g in got] == [w.token_ids for w in want]
    assert [g.finish for g in got] == [w.finish for w in want]
    assert got[0].logprobs == pytest.approx(want[0].logprobs, abs=1e-5)
    assert sent["return_tokens_as_token_ids"] is True and sent["stop_token_ids"] == [2]
    assert isinstance(sent["prompt"], list) and isinstance(sent["prompt"][0], int)
    # new weights: the client asks the server to drop its prefix cache
    with CompletionsServer(local) as srv:
        root = srv.url[: -len("/v1")]
        engine = OpenAIEngine(
            OpenAIEngineConfig(base_url=srv.url, flush_cache_url=root + "/reset_prefix_cache", verify_checkpoint=False)
        )
        engine.set_weights("step_000050")
        assert srv.flushes == 1 and engine.checkpoint == "step_000050"


def test_openai_engine_sglang_native_api(tiny_model):
    local = HFEngine(tiny_model)
    reqs = requests_for(2)
    with CompletionsServer(local) as srv:
        engine = OpenAIEngine(OpenAIEngineConfig(base_url=srv.url, api="sglang"))
        got = engine.generate(reqs)
        sent = list(srv.requests)
    assert engine.url.endswith("/generate") and "/v1" not in engine.url
    # requests go out concurrently: the server may see them in either order
    assert all(s["return_logprob"] is True for s in sent)
    assert sorted(s["input_ids"] for s in sent) == sorted(r.prompt_ids for r in reqs)
    want = local.generate(reqs)
    assert [g.token_ids for g in got] == [w.token_ids for w in want]
    assert got[1].logprobs == pytest.approx(want[1].logprobs, abs=1e-5)


def test_openai_engine_refuses_text_only_servers_and_reports_down_servers(tiny_model):
    with CompletionsServer(HFEngine(tiny_model), ids_as_text=True) as srv:
        res = OpenAIEngine(OpenAIEngineConfig(base_url=srv.url)).generate(requests_for(1))[0]
    assert res.error and "no token ids" in res.error
    down = OpenAIEngine(OpenAIEngineConfig(base_url="http://127.0.0.1:9/v1", timeout_s=0.5, max_retries=1))
    res = down.generate(requests_for(1))[0]
    assert res.error and "127.0.0.1:9" in res.error and res.token_ids == []


def test_hf_prefix_cache_matches_full_prefill_and_is_flushed_on_new_weights(tiny_model):
    full, cached = HFEngine(tiny_model), HFEngine(tiny_model, prefix_cache=True)
    first = GenRequest(prompt_ids=list(range(10, 60)), max_new_tokens=8, seed=1, temperature=1.0, cache_key="r0")
    a = cached.generate([first])[0]
    assert a.token_ids == full.generate([first])[0].token_ids
    assert (
        "r0" in cached._cache
        and cached._cache["r0"][0] == (first.prompt_ids + a.token_ids)[: len(cached._cache["r0"][0])]
    )
    second = GenRequest(
        prompt_ids=first.prompt_ids + a.token_ids + [11, 12, 13],
        max_new_tokens=8,
        seed=2,
        temperature=1.0,
        cache_key="r0",
    )
    b = cached.generate([second])[0]
    ref = full.generate([second])[0]
    assert b.token_ids == ref.token_ids and b.logprobs == pytest.approx(ref.logprobs, abs=1e-4)
    # a prompt that does not extend the cached context is prefilled from scratch
    other = GenRequest(prompt_ids=list(range(20, 70)), max_new_tokens=5, seed=3, temperature=1.0, cache_key="r0")
    assert cached.generate([other])[0].token_ids == full.generate([other])[0].token_ids
    cached.set_weights(tiny_model)
    assert cached._cache == {}
    cached.generate([first])
    cached.release("r0")
    assert cached._cache == {}


def test_hf_batched_prefix_cache_equals_full_prefill_over_turns(tiny_model):
    full, cached = HFEngine(tiny_model), HFEngine(tiny_model, prefix_cache=True)
    reqs = [
        GenRequest(
            prompt_ids=list(range(10, 10 + n)),
            max_new_tokens=m,
            seed=i,
            temperature=1.0,
            stop_ids=(2,),
            cache_key=f"r{i}",
        )
        for i, (n, m) in enumerate(((30, 8), (45, 12), (20, 5)))
    ]
    for turn in range(3):
        got, want = cached.generate(reqs), [full.generate([r])[0] for r in reqs]
        assert [g.token_ids for g in got] == [w.token_ids for w in want]
        for g, w in zip(got, want):
            assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
        assert set(cached._cache) == {"r0", "r1", "r2"}
        # next turn: context + generated + a different-length observation per row (row 1 uncached on turn 2)
        reqs = [
            GenRequest(
                prompt_ids=r.prompt_ids + g.token_ids + list(range(40, 41 + 3 * i)),
                max_new_tokens=r.max_new_tokens,
                seed=r.seed + 10,
                temperature=1.0,
                stop_ids=(2,),
                cache_key=None if (i == 1 and turn == 1) else r.cache_key,
            )
            for i, (r, g) in enumerate(zip(reqs, got))
        ]


def test_continuous_schedule_matches_cohorts_through_a_served_engine(tiny_model, tokenizer, tmp_path):
    """Every rollout on its own thread against a served engine gives the records lockstep cohorts give."""
    from rollout_doubles import ToyEnv, make_messages

    from bat.config.rollout import RolloutBudgets
    from bat.rollout.chat import TurnTokens
    from bat.rollout.loop import run_rollouts
    from bat.rollout.spec import LoopSettings, RolloutSpec

    tt = TurnTokens(tokenizer)
    budgets = RolloutBudgets(max_assistant_turns=3, max_tool_calls=3, max_new_tokens_per_turn=8)
    with CompletionsServer(HFEngine(tiny_model)) as srv:
        engine = OpenAIEngine(OpenAIEngineConfig(base_url=srv.url, concurrency=4), checkpoint="ck")
        runs = {}
        for schedule in ("continuous", "cohorts"):
            specs = [
                RolloutSpec(
                    rollout_id=f"r{i}",
                    state_id="s",
                    k=i,
                    seed=50 + i,
                    env=ToyEnv(tmp_path / schedule / str(i)),
                    messages=make_messages(i),
                )
                for i in range(4)
            ]
            settings = LoopSettings(
                budgets=budgets, temperature=1.0, no_tool_call="observe", schedule=schedule, tool_workers=2
            )
            runs[schedule] = [o.record for o in run_rollouts(engine, specs, tt, settings)]
    assert [r.rollout_id for r in runs["continuous"]] == ["r0", "r1", "r2", "r3"]
    for a, b in zip(runs["continuous"], runs["cohorts"]):
        assert a.token_ids == b.token_ids and a.loss_mask == b.loss_mask and a.end_reason == b.end_reason
        assert len(a.turns) == 3


def test_schedule_resolution_and_refusals(tiny_model):
    from bat.rollout.loop import resolve_schedule

    hf = HFEngine(tiny_model)
    served = OpenAIEngine(OpenAIEngineConfig())
    assert resolve_schedule(hf, "auto") == "cohorts" and resolve_schedule(served, "auto") == "continuous"
    assert resolve_schedule(served, "cohorts") == "cohorts"
    with pytest.raises(ValueError, match="needs an engine that batches concurrent requests"):
        resolve_schedule(hf, "continuous")
    with pytest.raises(ValueError, match="valid: \\['auto', 'cohorts', 'continuous'\\]"):
        resolve_schedule(hf, "fastest")


def test_vllm_engine_without_a_vllm_environment_names_the_fix(monkeypatch, tmp_path):
    from bat.rollout import vllm_server
    from bat.rollout.vllm_server import VllmServerError, cpu_bind, resolve_python

    monkeypatch.delenv("BAT_VLLM_PYTHON", raising=False)
    with pytest.raises(VllmServerError, match="no such interpreter"):
        resolve_python(str(tmp_path / "nope" / "python"))
    monkeypatch.setenv("BAT_VLLM_PYTHON", str(tmp_path / "missing"))
    with pytest.raises(VllmServerError, match="BAT_VLLM_PYTHON"):
        resolve_python(None)
    monkeypatch.delenv("BAT_VLLM_PYTHON")
    monkeypatch.setattr(vllm_server, "_vllm_importable_here", lambda: False)
    monkeypatch.setattr(vllm_server, "_repo_root", lambda: tmp_path)
    with pytest.raises(VllmServerError, match="scripts/bootstrap.sh"):
        resolve_python(None)
    assert cpu_bind("0-3") == "0-3" and cpu_bind("auto")


def test_served_checkpoint_is_verified_both_ways(tiny_model, other_tiny_model):
    """A server on checkpoint A passes the probe for A and is refused for B, naming both; after the server is
    reloaded on B, moving the engine to B passes."""
    from bat.config.rollout import RolloutBudgets
    from bat.rollout.probe import ServedModelMismatch

    other = other_tiny_model
    server_engine = HFEngine(tiny_model)
    with CompletionsServer(server_engine) as srv:
        cfg = RolloutConfig(
            engine="openai",
            openai=OpenAIEngineConfig(base_url=srv.url),
            budgets=RolloutBudgets(max_context_tokens=1024),
        )
        engine = make_engine(cfg, tiny_model)  # the server serves tiny_model: accepted
        assert engine.checkpoint == str(tiny_model)
        with pytest.raises(ServedModelMismatch, match="does not serve the checkpoint") as info:
            make_engine(cfg, other)
        assert srv.url in str(info.value) and str(other) in str(info.value)
        with pytest.raises(ServedModelMismatch):
            engine.set_weights(other)  # the server was not reloaded: refused, the engine keeps its checkpoint
        assert engine.checkpoint == str(tiny_model)
        server_engine.set_weights(other)  # the server's owner reloads it on the new checkpoint
        engine.set_weights(other)
        assert engine.checkpoint == str(other)
