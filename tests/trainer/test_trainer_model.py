"""The GPT: shapes, causal masking, weight tying, init, optimizer groups, generation, BERT masking."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.model import GPT, IGNORE_INDEX, GPTConfig, apply_rotary, mask_tokens, parameter_count, rotary_tables


def tiny(**overrides) -> GPT:
    torch.manual_seed(0)
    settings = {"vocab_size": 97, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32, **overrides}
    return GPT(GPTConfig(**settings)).eval()


@pytest.mark.parametrize("positions", ["rope", "learned"])
def test_shapes_and_loss(positions):
    model = tiny(positions=positions, bias=True)
    idx = torch.randint(0, 97, (3, 16))
    logits, loss = model(idx)
    assert logits.shape == (3, 16, 97) and loss is None
    logits, loss = model(idx, torch.randint(0, 97, (3, 16)))
    assert loss.shape == () and math.isfinite(loss.item())
    # At init the prediction is close to uniform: the loss is close to ln(vocab).
    assert abs(loss.item() - math.log(97)) < 0.3
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_loss_ignores_positions_marked_ignore():
    model = tiny()
    idx = torch.randint(0, 97, (2, 16))
    targets = idx.clone()
    targets[:, ::2] = IGNORE_INDEX
    logits, loss = model(idx, targets)
    kept = targets != IGNORE_INDEX
    expected = torch.nn.functional.cross_entropy(logits[kept], targets[kept])
    assert torch.allclose(loss, expected)


@pytest.mark.parametrize("positions", ["rope", "learned"])
def test_future_tokens_do_not_change_past_logits(positions):
    model = tiny(positions=positions)
    idx = torch.randint(0, 97, (2, 16))
    changed = idx.clone()
    changed[:, 10:] = (changed[:, 10:] + 1) % 97
    before, _ = model(idx)
    after, _ = model(changed)
    assert torch.equal(before[:, :10], after[:, :10])
    assert not torch.allclose(before[:, 10:], after[:, 10:])


def test_masked_objective_attends_both_ways():
    model = tiny(objective="masked")
    idx = torch.randint(0, 97, (2, 16))
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 97
    assert not torch.allclose(model(idx)[0][:, 0], model(changed)[0][:, 0])


def test_rotary_scores_depend_on_relative_position_only():
    """RoPE's point: the score of a query at position m and a key at position n is a function of
    m - n (RoFormer, section 3.4.2)."""
    cos, sin = rotary_tables(8, 32)
    torch.manual_seed(0)
    q, k = torch.randn(8), torch.randn(8)

    def score(m: int, n: int) -> float:
        return (apply_rotary(q, cos[m], sin[m]) @ apply_rotary(k, cos[n], sin[n])).item()

    assert score(5, 2) == pytest.approx(score(20, 17), abs=1e-5)
    assert score(0, 0) == pytest.approx((q @ k).item(), abs=1e-6)
    assert score(5, 2) != pytest.approx(score(5, 3), abs=1e-3)


def test_weight_tying_and_parameter_count():
    model = tiny(positions="learned")
    assert model.lm_head.weight is model.wte.weight
    c = model.config
    per_block = 12 * c.n_embd**2 + 2 * c.n_embd  # qkv + proj + mlp weights, two LayerNorm gains
    everything = c.vocab_size * c.n_embd + c.block_size * c.n_embd + c.n_layer * per_block + c.n_embd
    assert model.num_parameters(non_embedding=False) == everything
    assert model.num_parameters() == everything - c.block_size * c.n_embd  # position table left out
    assert model.flops_per_token() == 6 * model.num_parameters() + 12 * c.n_layer * c.n_embd * c.block_size
    # A gradient through the head reaches the embedding (one tensor).
    _, loss = model(torch.randint(0, 97, (1, 8)), torch.randint(0, 97, (1, 8)))
    loss.backward()
    assert model.wte.weight.grad is not None


@pytest.mark.parametrize(
    "shape",
    [{}, {"bias": True}, {"positions": "learned"}, {"bias": True, "positions": "learned", "n_layer": 3}],
)
def test_parameter_count_without_building_the_model_is_the_models(shape):
    config = GPTConfig(vocab_size=97, block_size=16, n_head=2, n_embd=32, **{"n_layer": 2, **shape})
    assert parameter_count(config) == GPT(config).num_parameters(non_embedding=False)


def test_init_scales_residual_projections():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, block_size=8, n_layer=8, n_head=4, n_embd=256))
    residual = 0.02 / math.sqrt(2 * 8)
    assert abs(model.blocks[0].attn.proj.weight.std().item() - residual) < 0.1 * residual
    assert abs(model.blocks[0].mlp.proj.weight.std().item() - residual) < 0.1 * residual
    assert abs(model.blocks[0].mlp.fc.weight.std().item() - 0.02) < 0.002
    assert abs(model.wte.weight.std().item() - 0.02) < 0.002


def test_optimizer_decays_matrices_only():
    model = tiny(bias=True, positions="learned")
    optimizer = model.configure_optimizer(0.1, 1e-3, (0.9, 0.95), "cpu")
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    assert any(p is model.wte.weight for p in decay["params"])
    assert sum(p.numel() for g in optimizer.param_groups for p in g["params"]) == model.num_parameters(False)


def test_generate_is_seeded_and_stops_at_end_of_document():
    model = tiny()
    start = torch.tensor([[0, 5, 6]])
    one = model.generate(start, 12, temperature=1.0, top_k=10, generator=torch.Generator().manual_seed(3))
    two = model.generate(start, 12, temperature=1.0, top_k=10, generator=torch.Generator().manual_seed(3))
    assert one.shape == (1, 15) and torch.equal(one, two)
    greedy = model.generate(start, 5, temperature=0)
    eod = int(greedy[0, 3])  # make the first greedy token the end of document: generation stops there
    stopped = model.generate(start, 5, temperature=0, eod_id=eod)
    assert stopped.tolist() == [[0, 5, 6, eod]]
    # Longer than the window: the context is cropped to block_size.
    assert model.generate(torch.zeros(1, 16, dtype=torch.long), 3, temperature=0).shape == (1, 19)
    with pytest.raises(ValueError, match="masked"):
        tiny(objective="masked").generate(start, 2)


def test_mask_tokens_proportions_and_specials():
    vocab, specials, mask_id = 50, [0, 1, 2, 3], 2
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, vocab, (400, 512), generator=generator)
    tokens[:, ::7] = 0  # end-of-document tokens sprinkled in
    tokens[:, 3::11] = 3
    special = torch.isin(tokens, torch.tensor(specials))
    inputs, targets = mask_tokens(tokens, mask_id, vocab, specials, torch.Generator().manual_seed(1))
    chosen = targets != IGNORE_INDEX
    n = chosen.sum().item()
    assert abs(n / (~special).sum().item() - 0.15) < 0.003
    assert not (chosen & special).any()  # specials are never chosen
    assert torch.equal(inputs[special], tokens[special])
    assert torch.equal(targets[chosen], tokens[chosen])
    assert torch.equal(inputs[~chosen], tokens[~chosen])
    masked = (inputs[chosen] == mask_id).float().mean().item()
    replaced = ((inputs[chosen] != mask_id) & (inputs[chosen] != tokens[chosen])).float().mean().item()
    kept = (inputs[chosen] == tokens[chosen]).float().mean().item()
    ordinary = vocab - len(specials)
    # A random replacement draws the original token 1 time in `ordinary`.
    assert abs(masked - 0.8) < 0.006
    assert abs(replaced - 0.1 * (1 - 1 / ordinary)) < 0.004
    assert abs(kept - 0.1 * (1 + 1 / ordinary)) < 0.004
    assert not torch.isin(inputs[chosen & (inputs != mask_id)], torch.tensor(specials)).any()
    again = mask_tokens(tokens, mask_id, vocab, specials, torch.Generator().manual_seed(1))
    assert torch.equal(again[0], inputs) and torch.equal(again[1], targets)
