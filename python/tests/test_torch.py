"""mixrt.torch: a small transformer decoder step with a KV cache, wrapped and run through mixrt,
equals eager PyTorch step by step; the cache stays inside the adapter between calls; the export
is cached by module and shapes. Skipped when PyTorch is not installed (python3-torch)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import mixrt.torch  # noqa: E402

VOCAB, WIDTH, HEADS = 64, 32, 4


class TinyDecoder(torch.nn.Module):
    """One pre-norm decoder layer over a cache: ids [1, 1], past_k/past_v [1, heads, past, dh]."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(VOCAB, WIDTH)
        self.norm1 = torch.nn.LayerNorm(WIDTH)
        self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.norm2 = torch.nn.LayerNorm(WIDTH)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(WIDTH, 4 * WIDTH), torch.nn.GELU(),
                                       torch.nn.Linear(4 * WIDTH, WIDTH))
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, ids, past_k, past_v):
        x = self.emb(ids)  # [1, 1, W]
        q, k, v = self.qkv(self.norm1(x)).split(WIDTH, dim=-1)
        dh = WIDTH // HEADS
        q, k, v = (t.reshape(1, 1, HEADS, dh).transpose(1, 2) for t in (q, k, v))
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(dh), dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(1, 1, WIDTH))
        x = x + self.mlp(self.norm2(x))
        return self.head(x), k, v


def make(model, tmp_path, monkeypatch, past=2):
    monkeypatch.setenv("MIXRT_TORCH_CACHE", str(tmp_path))
    g = torch.Generator().manual_seed(1)
    example = (torch.tensor([[3]]), torch.randn(1, HEADS, past, WIDTH // HEADS, generator=g),
               torch.randn(1, HEADS, past, WIDTH // HEADS, generator=g))
    axes = {"past_k": {2: "past_len"}, "past_v": {2: "past_len"},
            "present_k": {2: "past_len_1"}, "present_v": {2: "past_len_1"}}
    m = mixrt.torch.Module(model, example, ["ids", "past_k", "past_v"], ["logits", "present_k", "present_v"],
                           dynamic_axes=axes, state={"past_k": "present_k", "past_v": "present_v"})
    return m, example


def test_decode_equals_eager(tmp_path, monkeypatch):
    model = TinyDecoder().eval()
    m, (ids, past_k, past_v) = make(model, tmp_path, monkeypatch)
    token = ids
    for step in range(8):
        with torch.no_grad():
            want, past_k, past_v = model(token, past_k, past_v)
        got = m(token)  # the cache comes from the adapter's previous step
        assert isinstance(got, torch.Tensor) and got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"step {step}")
        token = want.argmax(-1)
    m.reset()
    with torch.no_grad():
        want = model(ids, *make(model, tmp_path, monkeypatch)[1][1:])[0]
    np.testing.assert_allclose(m(ids).numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_export_is_cached(tmp_path, monkeypatch):
    model = TinyDecoder().eval()
    with torch.no_grad():
        model.head.bias.add_(0.5)  # weights no other test exported
    m, example = make(model, tmp_path, monkeypatch)
    first = m.session()
    assert len(list(tmp_path.glob("*.onnx"))) == 1
    m2, _ = make(model, tmp_path, monkeypatch, past=5)  # another past_len: a dynamic axis
    assert m2.session() is first
    with torch.no_grad():
        model.head.bias.add_(1.0)
    m3, _ = make(model, tmp_path, monkeypatch)
    assert m3.session() is not first and len(list(tmp_path.glob("*.onnx"))) == 2
