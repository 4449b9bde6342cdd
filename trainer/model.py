"""A decoder-only GPT, small enough to read in one sitting.

The model is GPT-2's shape with two modern choices available:

* pre-norm blocks: ``x + attn(ln(x))`` then ``x + mlp(ln(x))``, a final LayerNorm, and the
  language-model head tied to the token embedding (one matrix reads tokens in and scores them out);
* positions either ``"rope"`` (rotary embeddings on queries and keys, RoFormer, Su et al. 2021; the
  default) or ``"learned"`` (GPT-2's absolute position table);
* objective ``"causal"`` (next-token prediction; attention sees only the past) or ``"masked"``
  (BERT's masked LM: attention sees the whole window and the loss is on the masked positions,
  see :func:`mask_tokens`).

Shapes: ``B`` batch, ``T`` time (tokens), ``C`` channels (``n_embd``), ``H`` heads, ``D = C / H``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE_INDEX = -100  # target of positions the loss skips (PyTorch's cross_entropy default)


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int = 256  # the longest window the model sees
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = False  # biases in the Linear layers and LayerNorms (GPT-2 had them)
    positions: Literal["rope", "learned"] = "rope"
    objective: Literal["causal", "masked"] = "causal"

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")
        if self.positions == "rope" and (self.n_embd // self.n_head) % 2:
            raise ValueError(
                f"rotary positions need an even head size; n_embd / n_head is {self.n_embd // self.n_head}"
            )
        if self.positions not in ("rope", "learned"):
            raise ValueError(f"positions must be 'rope' or 'learned', not {self.positions!r}")
        if self.objective not in ("causal", "masked"):
            raise ValueError(f"objective must be 'causal' or 'masked', not {self.objective!r}")


def parameter_count(config: GPTConfig) -> int:
    """The parameters :class:`GPT` builds for ``config`` (the tied head counted once), counted
    without building it: per block two LayerNorms, ``qkv`` and the attention's projection
    (``4 C^2``), the MLP (``8 C^2``); the token embedding, the learned position table if any,
    the final LayerNorm; biases (``11 C`` a block, ``C`` a LayerNorm) when ``bias``."""
    c = config.n_embd
    block = 12 * c * c + 2 * c + (11 * c if config.bias else 0)
    final_norm = 2 * c if config.bias else c
    positions = config.block_size * c if config.positions == "learned" else 0
    return config.n_layer * block + config.vocab_size * c + positions + final_norm


def rotary_tables(head_size: int, length: int, base: float = 10_000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angles, each ``(length, head_size)``: channel pair ``i`` of
    position ``t`` turns by ``t * base ** (-2i / head_size)`` (RoFormer, eq. 15)."""
    inv_freq = base ** (-torch.arange(0, head_size, 2, dtype=torch.float32) / head_size)
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq)  # (length, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (length, D): pairs are (i, i + D/2)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each channel pair ``(x[i], x[i + D/2])`` of ``x`` (B, H, T, D) by its angle."""
    first, second = x.chunk(2, dim=-1)
    rotated_half = torch.cat([-second, first], dim=-1)
    return x * cos + rotated_half * sin


class SelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.causal = config.objective == "causal"
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.proj.residual = True  # scaled at init, see GPT._init_weights
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``mask`` (B, 1, T, T), True where a position may attend, replaces the causal mask."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, H, T, D)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if rotary is not None:
            cos, sin = rotary
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=self.causal and mask is None,
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.proj.residual = True
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = SelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, rotary, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), rotary, mask)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd) if config.positions == "learned" else None
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying (Press & Wolf 2017), as GPT-2
        if config.positions == "rope":
            cos, sin = rotary_tables(config.n_embd // config.n_head, config.block_size)
            # Derived from the config, so not saved with the weights.
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        """GPT-2's init: N(0, 0.02) weights and zero biases; the projections that write into the
        residual stream get std 0.02 / sqrt(2 * n_layer), since each of the 2 * n_layer of them
        adds to the same sum (GPT-2 paper, section 2.3)."""
        if isinstance(module, nn.Linear):
            std = 0.02 / math.sqrt(2 * self.config.n_layer) if getattr(module, "residual", False) else 0.02
            if module is not self.lm_head:  # the head is the token embedding, initialized below
                nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self, non_embedding: bool = True) -> int:
        """Parameters, each tied tensor counted once. ``non_embedding`` leaves out the learned
        position table (a lookup, no arithmetic) but keeps the token embedding: tied to the head,
        it does a matmul's work for every token, so it belongs in compute estimates."""
        total = sum(p.numel() for p in self.parameters())  # parameters() yields a tied tensor once
        if non_embedding and self.wpe is not None:
            total -= self.wpe.weight.numel()
        return total

    def flops_per_token(self) -> int:
        """Training FLOPs per token: 6N for the matmuls of forward and backward (N =
        non-embedding parameters) plus 12 * n_layer * n_embd * block_size for attention's scores
        and weighted sums (PaLM, Chowdhery et al. 2022, appendix B). Model FLOP/s over a chip's
        peak is the MFU."""
        c = self.config
        return 6 * self.num_parameters(non_embedding=True) + 12 * c.n_layer * c.n_embd * c.block_size

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, ignore_index: int = IGNORE_INDEX
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits ``(B, T, vocab_size)`` for every position; with ``targets`` (B, T) also the
        mean cross-entropy in nats over the targets that are not ``ignore_index``."""
        B, T = idx.shape
        logits = self.lm_head(self.hidden_states(idx))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1).float(), targets.reshape(B * T), ignore_index=ignore_index)
        return logits, loss

    def hidden_states(
        self, idx: torch.Tensor, positions: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The last block's output after the final LayerNorm, ``(B, T, n_embd)``: what the head
        reads, and the features a downstream classifier (trainer.transfer) reads.

        ``positions`` (B, T) and ``mask`` (B, 1, T, T; True where a token may attend) lay out
        several sequences in one row, as the likelihood scorer packs a context and its choices:
        each token then has its own position (below ``block_size``) and sees what the mask lets
        it see; the row itself may be longer than the window."""
        T = idx.shape[1]
        if positions is None and T > self.config.block_size:
            raise ValueError(f"a window of {T} tokens is longer than block_size {self.config.block_size}")
        if positions is not None and int(positions.max()) >= self.config.block_size:
            raise ValueError(f"a position of {int(positions.max())} is past block_size {self.config.block_size}")
        x = self.wte(idx)
        rotary = None
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(T, device=idx.device) if positions is None else positions)
        elif positions is None:
            rotary = (self.rope_cos[:T].to(x.dtype), self.rope_sin[:T].to(x.dtype))
        else:  # (B, 1, T, D): each row its own positions, the same for every head
            rotary = (
                self.rope_cos[positions].unsqueeze(1).to(x.dtype),
                self.rope_sin[positions].unsqueeze(1).to(x.dtype),
            )
        x = self.drop(x)
        for block in self.blocks:
            x = block(x, rotary, mask)
        return self.ln_f(x)

    def configure_optimizer(
        self, weight_decay: float, lr: float, betas: tuple[float, float], device_type: str
    ) -> torch.optim.AdamW:
        """AdamW (decoupled weight decay, Loshchilov & Hutter 2019) that decays the 2-D tensors only:
        the Linear weights and the embeddings. The token embedding decays because it is also the
        output layer's weight; the learned position table is 2-D and decays with it, as in
        nanoGPT and GPT-2. Biases and LayerNorm gains (1-D) never decay: shrinking a gain toward 0
        is no regularizer. The fused kernel is used on CUDA."""
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        extra = {"fused": True} if device_type == "cuda" else {}
        return torch.optim.AdamW(groups, lr=lr, betas=betas, **extra)

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        eod_id: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Extend ``idx`` (B, T) by sampling up to ``max_new_tokens`` tokens, one at a time, from the
        last position's distribution at ``temperature`` (0 takes the most likely token), among
        the ``top_k`` most likely if given. With ``eod_id``, a row that samples it is finished
        (it is padded with ``eod_id`` from there) and sampling stops when every row is.
        Returns ``(B, T + new)``. A causal model only."""
        if self.config.objective != "causal":
            raise ValueError("a masked-LM model does not generate text; train with objective = 'causal'")
        finished = torch.zeros(idx.size(0), dtype=torch.bool, device=idx.device)
        for _ in range(max_new_tokens):
            context = idx[:, -self.config.block_size :]
            logits, _ = self(context)
            logits = logits[:, -1, :].float()
            if temperature <= 0:
                next_id = logits.argmax(dim=-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                probs = F.softmax(logits, dim=-1)
                next_id = torch.multinomial(probs, num_samples=1, generator=generator)
            if eod_id is not None:
                next_id = next_id.masked_fill(finished.unsqueeze(1), eod_id)
                finished |= next_id.squeeze(1) == eod_id
            idx = torch.cat([idx, next_id], dim=1)
            if eod_id is not None and bool(finished.all()):
                break
        return idx


def mask_tokens(
    tokens: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    generator: torch.Generator,
    rate: float = 0.15,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking (Devlin et al. 2019, section 3.1): each position that does not hold a special
    token is chosen with probability ``rate``; a chosen position's input becomes ``mask_id`` 80%
    of the time, a uniformly random non-special token 10% and stays itself 10%. Returns
    ``(inputs, targets)``: targets hold the original token at chosen positions and
    :data:`IGNORE_INDEX` elsewhere. The same ``generator`` state gives the same result."""
    specials = torch.tensor(sorted(set(special_ids)), dtype=tokens.dtype, device=tokens.device)
    chosen = torch.rand(tokens.shape, generator=generator, device=tokens.device) < rate
    chosen &= ~torch.isin(tokens, specials)
    action = torch.rand(tokens.shape, generator=generator, device=tokens.device)
    ordinary = torch.ones(vocab_size, dtype=torch.bool, device=tokens.device)
    ordinary[specials[specials < vocab_size].long()] = False
    ordinary_ids = ordinary.nonzero().squeeze(1).to(tokens.dtype)
    random_ids = ordinary_ids[torch.randint(len(ordinary_ids), tokens.shape, generator=generator, device=tokens.device)]
    inputs = tokens.clone()
    inputs = torch.where(chosen & (action < 0.8), torch.full_like(tokens, mask_id), inputs)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    targets = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE_INDEX))
    return inputs, targets
