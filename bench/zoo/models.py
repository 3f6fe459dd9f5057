"""The zoo's models written in torch (the transformer and recurrent ones; the CNNs come from
torchvision). Small sizes, random weights: they exist to exercise mixrt's import, shape inference
and kernels on graphs exactly as torch.onnx.export writes them."""
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    """Multi-head attention over the KV cache plus the new tokens, with a causal mask that is
    offset by the cache length (query i sees every cached key and the new keys up to i)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, past_key, past_value):
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).split(dim, dim=2)
        q = q.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        key = torch.cat([past_key, k], dim=2)
        value = torch.cat([past_value, v], dim=2)
        past_len = past_key.shape[2]
        total = key.shape[2]
        scores = torch.matmul(q, key.transpose(2, 3)) / math.sqrt(self.head_dim)
        query_pos = torch.arange(seq, device=x.device) + past_len
        key_pos = torch.arange(total, device=x.device)
        allowed = key_pos.unsqueeze(0) <= query_pos.unsqueeze(1)
        scores = scores.masked_fill(~allowed, -1e9)
        att = torch.softmax(scores, dim=-1)
        out = torch.matmul(att, value).transpose(1, 2).reshape(batch, seq, dim)
        return self.proj(out), key, value


class DecoderBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, past_key, past_value):
        a, key, value = self.attn(self.ln1(x), past_key, past_value)
        x = x + a
        x = x + self.mlp(self.ln2(x))
        return x, key, value


class TinyGPT(nn.Module):
    """GPT-style decoder: token ids [1, seq] and past keys/values per layer
    [1, heads, past_len, head_dim] in, logits and the grown keys/values (present) out."""

    def __init__(self, vocab=256, dim=64, heads=4, layers=3, max_pos=128):
        super().__init__()
        self.layers = layers
        self.heads = heads
        self.head_dim = dim // heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_pos, dim)
        self.blocks = nn.ModuleList([DecoderBlock(dim, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids, *past):
        seq = input_ids.shape[1]
        past_len = past[0].shape[2]
        positions = torch.arange(seq, device=input_ids.device) + past_len
        x = self.tok(input_ids) + self.pos(positions).unsqueeze(0)
        presents = []
        for i, block in enumerate(self.blocks):
            x, key, value = block(x, past[2 * i], past[2 * i + 1])
            presents += [key, value]
        return (self.head(self.ln_f(x)), *presents)


class EncoderLayer(nn.Module):
    """Post-norm BERT layer; the additive mask is [batch, 1, 1, seq]."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.ln1 = nn.LayerNorm(dim, eps=1e-12)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.ln2 = nn.LayerNorm(dim, eps=1e-12)

    def split(self, t):
        batch, seq, _ = t.shape
        return t.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, additive_mask):
        batch, seq, dim = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + additive_mask
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(batch, seq, dim)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.ff(x))


class TinyBert(nn.Module):
    """BERT-style encoder: input_ids and attention_mask [batch, seq] (1 = token, 0 = padding) in,
    the last hidden state and the tanh-pooled first token out."""

    def __init__(self, vocab=512, dim=64, heads=4, layers=2, max_pos=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_pos, dim)
        self.segment = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList([EncoderLayer(dim, heads) for _ in range(layers)])
        self.pool = nn.Linear(dim, dim)

    def forward(self, input_ids, attention_mask):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        x = self.tok(input_ids) + self.pos(positions) + self.segment(torch.zeros_like(input_ids))
        x = self.ln(x)
        additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, additive)
        return x, torch.tanh(self.pool(x[:, 0]))


class LstmTagger(nn.Module):
    """Bidirectional LSTM tagger: token ids [batch, seq] in, tag log-probabilities out."""

    def __init__(self, vocab=300, emb=32, hidden=48, tags=9):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        h, _ = self.lstm(self.emb(tokens))
        return torch.log_softmax(self.out(h), dim=-1)


class GruModel(nn.Module):
    """Two-layer GRU over features [batch, seq, feat] with an initial state [2, batch, hidden]:
    a per-step regression head and the final states out."""

    def __init__(self, feat=20, hidden=40, outs=5):
        super().__init__()
        self.gru = nn.GRU(feat, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, outs)

    def forward(self, x, h0):
        y, h = self.gru(x, h0)
        return self.head(y), h
