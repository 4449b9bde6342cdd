"""Sample text from a trained model, with the tokenizer stored beside its checkpoints.

python -m trainer.generate runs/demo/train/main "The market" --max-tokens 60 --seed 1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer

from pipeline.formats.tokens import load_tokenizer, special_ids
from trainer.checkpoints import CHECKPOINT_DIR, load_checkpoint, load_latest_checkpoint
from trainer.model import GPT, GPTConfig


def _load_checkpoint(checkpoint_or_out_dir: Path) -> tuple[dict, Path]:
    """(checkpoint, the run's out_dir) for a checkpoint file or a training out_dir (its newest
    checkpoint that loads; a bad newer one is skipped with a warning on stderr)."""
    path = Path(checkpoint_or_out_dir)
    if path.is_dir():
        found = load_latest_checkpoint(path, lambda line: print(line, file=sys.stderr))
        if found is None:
            raise FileNotFoundError(f"no checkpoint in {path / CHECKPOINT_DIR}; train first, or pass a .pt file")
        return found[1], path
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint or training folder at {path}")
    return load_checkpoint(path), path.parent.parent  # <out_dir>/checkpoints/step-NNNNNN.pt


def load_model(checkpoint_or_out_dir: Path, device: str = "cpu") -> tuple[GPT, Tokenizer, dict]:
    """The trained model (in eval mode on ``device``), the run's tokenizer and the checkpoint's
    plain values (step, config, ...: everything but weights and optimizer state)."""
    checkpoint, out_dir = _load_checkpoint(checkpoint_or_out_dir)
    model = GPT(GPTConfig(**checkpoint["model_config"]))
    model.load_state_dict(checkpoint["model"])
    model.to(device).eval()
    tokenizer = load_tokenizer(out_dir / "tokenizer.json")
    info = {key: value for key, value in checkpoint.items() if key not in ("model", "optimizer", "rng")}
    return model, tokenizer, info


def generate_text(
    checkpoint_or_out_dir: Path,
    prompt: str,
    max_tokens: int = 100,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> str:
    """Continue ``prompt`` with up to ``max_tokens`` sampled tokens; return the continuation (the
    prompt not included), stopping at the end-of-document token.

    The model sees the end-of-document token and then the prompt, as a document starts in
    training (an empty prompt starts a new document). ``temperature`` 0 is greedy; ``top_k``
    keeps the k most likely tokens. The same seed gives the same text.
    """
    model, tokenizer, _ = load_model(checkpoint_or_out_dir, device)
    eod = special_ids(tokenizer)["eod"]
    tokenizer.encode_special_tokens = True  # a literal "<|endoftext|>" in the prompt is text, as in the shards
    ids = [eod, *tokenizer.encode(prompt, add_special_tokens=False).ids]
    generator = torch.Generator(device=device).manual_seed(seed)
    idx = torch.tensor([ids], dtype=torch.long, device=device)
    out = model.generate(idx, max_tokens, temperature=temperature, top_k=top_k, eod_id=eod, generator=generator)
    new = out[0, len(ids) :].tolist()
    if eod in new:
        new = new[: new.index(eod)]
    return tokenizer.decode(new, skip_special_tokens=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.generate", description="Sample text from a trained model.")
    parser.add_argument("checkpoint", type=Path, help="a training out_dir or a checkpoint .pt file")
    parser.add_argument("prompt", nargs="?", default="")
    parser.add_argument("--max-tokens", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        text = generate_text(args.checkpoint, args.prompt, args.max_tokens, args.temperature, args.top_k, args.seed)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(args.prompt + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
