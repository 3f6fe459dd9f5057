#!/usr/bin/python3
"""A PyTorch module run through mixrt with its KV cache kept in the adapter (mixrt.torch).

    PYTHONPATH=python MIXRT_LIBRARY=build/libmixrt.so examples/python/torch_adapter.py
"""
import torch

import mixrt.torch


class Step(torch.nn.Module):
    """A toy decode step: the new token's embedding attends over the cache of earlier ones."""

    def __init__(self, vocab=50, width=16):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, ids, cache):
        x = self.emb(ids)                              # [1, 1, width]
        cache = torch.cat([cache, x], dim=1)           # [1, past + 1, width]
        weights = torch.softmax(x @ cache.transpose(1, 2), dim=-1)
        return self.head(weights @ cache), cache


def main():
    torch.manual_seed(0)
    model = Step().eval()
    example = (torch.tensor([[1]]), torch.zeros(1, 1, 16))
    m = mixrt.torch.Module(model, example, ["ids", "cache"], ["logits", "new_cache"],
                           dynamic_axes={"cache": {1: "past"}, "new_cache": {1: "past_1"}},
                           state={"cache": "new_cache"})
    token, cache, tokens = torch.tensor([[1]]), example[1], []
    for _ in range(10):
        logits = m(token)                              # cache: the previous step's new_cache
        with torch.no_grad():
            want, cache = model(token, cache)
        assert torch.allclose(logits, want, rtol=1e-4, atol=1e-5)
        token = logits.argmax(-1)
        tokens.append(int(token))
    print("tokens (mixrt == eager PyTorch):", tokens)


if __name__ == "__main__":
    main()
