#!/usr/bin/python3
"""train.py — trains braid's built-in default model: a small qwen35 hybrid (Gated DeltaNet + gated attention,
with one jointly trained MTP/nextn block) and a ~10x smaller draft model with the same vocabulary, on freely
licensed text shipped by Debian (the King James Bible and a few fortune files, see SOURCES.md), and writes
them as Q8_0 GGUF files that braid and llama.cpp both load.

The forward pass here is written to compute exactly what llama.cpp's qwen35 graph computes on the exported
file (shared/docs/architectures.md §1): RMSNorm weights used as stored, per-head interleaved query/gate
rows, IMROPE that reduces to NEOX rotation for text positions, the GDN recurrence in llama.cpp's order with
tiled key-head broadcast, tied embeddings. Anything else would train a model that braid runs differently.

Everything is seeded: the corpus order, the tokenizer, the initial weights, the batches (each step's batch
is drawn from a generator seeded by (seed, step), so a resumed run draws what an uninterrupted one would).

usage (see README.md for the full rebuild):
  /usr/bin/python3 train/train.py --work /tmp/braid-train --out models [--threads 2]
  --dev shrinks everything to a one-minute smoke run.
"""
import argparse
import collections
import heapq
import json
import math
import os
import random
import subprocess
import sys
import time

import regex
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- corpus ------------------------------------------------------------------------------------------------

FORTUNE_DIR = "/usr/share/games/fortunes"
FORTUNE_FILES = ["fortunes", "wisdom", "literature", "platitudes", "riddles", "tao", "love"]
HELDOUT_EVERY = 40  # every 40th Bible chapter (by canonical order) is held out of training


def read_bible():
    """Chapters of the KJV as (book, chapter, [verse texts]) in canonical order, from the bible-kjv reader."""
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True).stdout
    text = out.decode("utf-8")
    chapters = []
    key = None
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        m = regex.match(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$", line)
        if not m:
            # a continuation of the previous verse (the reader never wraps, but be safe)
            chapters[-1][2][-1] += " " + line
            continue
        book, ch, _, verse = m.groups()
        if (book, ch) != key:
            key = (book, ch)
            chapters.append((book, int(ch), []))
        chapters[-1][2].append(verse)
    return chapters


def read_fortunes():
    docs = []
    for name in FORTUNE_FILES:
        with open(os.path.join(FORTUNE_DIR, name), "rb") as f:
            raw = f.read().decode("utf-8", errors="replace")
        for item in raw.split("\n%\n"):
            item = item.strip("\n%").rstrip()
            item = "\n".join(l.rstrip() for l in item.split("\n"))
            if 10 <= len(item) <= 600:
                docs.append(item)
    return docs


# ---- dialogues ---------------------------------------------------------------------------------------------

BOOK_NAMES = {}  # abbreviation -> the name used in dialogues (the abbreviation itself unless listed)
for _abbr, _name in [("Ge", "Genesis"), ("Exo", "Exodus"), ("Lev", "Leviticus"), ("Num", "Numbers"),
                     ("Deu", "Deuteronomy"), ("Jos", "Joshua"), ("Jdg", "Judges"), ("Rut", "Ruth"),
                     ("Psa", "Psalms"), ("Pro", "Proverbs"), ("Ecc", "Ecclesiastes"), ("Isa", "Isaiah"),
                     ("Jer", "Jeremiah"), ("Mat", "Matthew"), ("Mar", "Mark"), ("Luk", "Luke"), ("Joh", "John"),
                     ("Act", "Acts"), ("Rom", "Romans"), ("Rev", "Revelation")]:
    BOOK_NAMES[_abbr] = _name

TOPICS = ["light", "love", "water", "bread", "king", "peace", "fear", "wisdom", "heart", "land", "fire", "house",
          "children", "mercy", "truth", "life", "death", "sea", "mountain", "night", "day", "earth", "heaven",
          "people", "word", "spirit", "hand", "city", "gold", "sword", "sheep", "gate", "law", "joy", "faith"]


def build_dialogues(chapters, fortunes, rng):
    """A small ChatML dialogue set made from the training text itself, so chat turns read as answers:
    questions about a topic answered with a verse that mentions it, requests for a verse by reference,
    and requests for a saying answered with a fortune."""
    verses = [(b, c, i + 1, v) for (b, c, vs) in chapters for i, v in enumerate(vs)]
    by_topic = collections.defaultdict(list)
    for item in verses:
        words = set(regex.findall(r"[a-z]+", item[3].lower()))
        for t in TOPICS:
            if t in words:
                by_topic[t].append(item)
    dialogues = []
    asks = ["What does the Bible say about {t}?", "Tell me about {t}.", "Give me a verse about {t}.",
            "What is written about {t}?", "Say something about {t}."]
    for t in TOPICS:
        pool = by_topic[t]
        for _ in range(min(40, len(pool))):
            b, c, n, v = pool[rng.randrange(len(pool))]
            q = asks[rng.randrange(len(asks))].format(t=t)
            ref = "%s %d:%d" % (BOOK_NAMES.get(b, b), c, n)
            dialogues.append([("user", q), ("assistant", "%s says: %s" % (ref, v))])
    named = [x for x in verses if x[0] in BOOK_NAMES]
    for _ in range(600):
        b, c, n, v = named[rng.randrange(len(named))]
        ref = "%s %d:%d" % (BOOK_NAMES[b], c, n)
        q = ["What does %s say?", "Quote %s.", "Read me %s."][rng.randrange(3)] % ref
        dialogues.append([("user", q), ("assistant", v)])
    for _ in range(500):
        f = fortunes[rng.randrange(len(fortunes))]
        q = ["Tell me a fortune.", "Say something wise.", "Give me a saying.", "Tell me something."][rng.randrange(4)]
        dialogues.append([("user", q), ("assistant", f)])
    greet = [("Hello", "Hello. Peace be unto you."), ("Hello!", "Hello! Peace be with you."),
             ("Hi", "Hi. Grace be unto you, and peace."), ("Who are you?", "I am a small model that has read the "
             "King James Bible and a book of fortunes."), ("What can you do?", "I can quote verses and sayings, "
             "and speak of what is written in them.")]
    for _ in range(40):
        for q, a in greet:
            dialogues.append([("user", q), ("assistant", a)])
    rng.shuffle(dialogues)
    return dialogues


CHAT_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                 "{% endif %}")


# ---- byte-level BPE ----------------------------------------------------------------------------------------

# The qwen35 pre-tokenizer (llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN35, shared/docs/architectures.md §1.10).
PRE_RE = regex.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                       r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def bytes_to_unicode():
    """GPT-2's byte -> printable character map used by every byte-level BPE vocabulary."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()


def pieces(text):
    return [''.join(B2U[b] for b in p.encode("utf-8")) for p in PRE_RE.findall(text)]


def train_bpe(texts, n_merges):
    """Classic BPE on pre-tokenized words: repeatedly merge the most frequent adjacent pair (ties: the
    smallest pair in code-point order, so the result is deterministic)."""
    counts = collections.Counter()
    for t in texts:
        counts.update(pieces(t))
    words = [list(w) for w in sorted(counts)]
    freq = [counts[w] for w in sorted(counts)]
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for wi, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += freq[wi]
            where[(a, b)].add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        c, p = heapq.heappop(heap)
        if pair_count.get(p, 0) != -c or c == 0:
            continue
        merges.append(p)
        a, b = p
        ab = a + b
        touched = set()
        for wi in sorted(where[p]):
            w = words[wi]
            f = freq[wi]
            for x, y in zip(w, w[1:]):
                pair_count[(x, y)] -= f
                touched.add((x, y))
            nw = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    nw.append(ab)
                    i += 2
                else:
                    nw.append(w[i])
                    i += 1
            words[wi] = nw
            for x, y in zip(nw, nw[1:]):
                pair_count[(x, y)] += f
                where[(x, y)].add(wi)
                touched.add((x, y))
        del pair_count[p]
        for q in touched:
            if q != p and pair_count.get(q, 0) > 0:
                heapq.heappush(heap, (-pair_count[q], q))
    return merges


class Tokenizer:
    def __init__(self, merges):
        self.merges = merges
        self.rank = {p: i for i, p in enumerate(merges)}
        self.tokens = [B2U[b] for b in range(256)] + [a + b for a, b in merges] + SPECIALS
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.cache = {}

    def special(self, name):
        return self.ids[name]

    def _word(self, w):
        got = self.cache.get(w)
        if got is not None:
            return got
        sym = list(w)
        while len(sym) > 1:
            best = None
            for i in range(len(sym) - 1):
                r = self.rank.get((sym[i], sym[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            a, b = self.merges[best[0]]
            out = []
            i = 0
            while i < len(sym):
                if i + 1 < len(sym) and sym[i] == a and sym[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            sym = out
        ids = [self.ids[s] for s in sym]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        out = []
        for p in pieces(text):
            out.extend(self._word(p))
        return out


# ---- model -------------------------------------------------------------------------------------------------

MAIN = dict(n_embd=192, n_layer=4, interval=2, n_ff=512, n_head=4, n_head_kv=2, head_dim=32, n_rot=16,
            sections=[3, 3, 2, 0], ssm_conv=4, ssm_state=32, ssm_groups=2, ssm_heads=4, mtp=1)
DRAFT = dict(n_embd=64, n_layer=2, interval=2, n_ff=128, n_head=2, n_head_kv=1, head_dim=32, n_rot=16,
             sections=[3, 3, 2, 0], ssm_conv=4, ssm_state=16, ssm_groups=2, ssm_heads=4, mtp=0)
EPS = 1e-6
ROPE_BASE = 10000.0
N_CTX_TRAIN = 256


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def l2_norm(x):
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + EPS)


class FFN(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate = nn.Linear(c["n_embd"], c["n_ff"], bias=False)
        self.up = nn.Linear(c["n_embd"], c["n_ff"], bias=False)
        self.down = nn.Linear(c["n_ff"], c["n_embd"], bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Attention(nn.Module):
    """Gated full attention: q rows interleaved per head as [q_h | gate_h], q/k RMSNorm per head, NEOX
    rotation of the first n_rot dims (what IMROPE does for text), causal softmax, GQA by consecutive heads,
    output times sigmoid(gate)."""

    def __init__(self, c):
        super().__init__()
        E, hd, nh, nkv = c["n_embd"], c["head_dim"], c["n_head"], c["n_head_kv"]
        self.c = c
        self.q = nn.Linear(E, 2 * hd * nh, bias=False)
        self.k = nn.Linear(E, hd * nkv, bias=False)
        self.v = nn.Linear(E, hd * nkv, bias=False)
        self.o = nn.Linear(hd * nh, E, bias=False)
        self.q_norm = nn.Parameter(torch.ones(hd))
        self.k_norm = nn.Parameter(torch.ones(hd))

    def rope(self, x, T):
        n_rot = self.c["n_rot"]
        half = n_rot // 2
        # theta_k = p * base^(-2k/n_rot), computed in double then rounded, as close to ggml's float loop as
        # training needs (the exported model is evaluated by braid/llama.cpp with their own rotation).
        inv = torch.tensor([ROPE_BASE ** (-2.0 * k / n_rot) for k in range(half)], dtype=torch.float64)
        ang = (torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :])
        cos = torch.cos(ang).float()[None, :, None, :]
        sin = torch.sin(ang).float()[None, :, None, :]
        x0 = x[..., :half]
        x1 = x[..., half:n_rot]
        rest = x[..., n_rot:]
        return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos, rest], dim=-1)

    def forward(self, u):
        B, T, _ = u.shape
        hd, nh, nkv = self.c["head_dim"], self.c["n_head"], self.c["n_head_kv"]
        qg = self.q(u).view(B, T, nh, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:]
        k = self.k(u).view(B, T, nkv, hd)
        v = self.v(u).view(B, T, nkv, hd)
        q = self.rope(rms_norm(q, self.q_norm), T)
        k = self.rope(rms_norm(k, self.k_norm), T)
        rep = nh // nkv
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, nh, T, hd]
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2)  # [B, T, nh, hd]
        o = o * torch.sigmoid(gate)
        return self.o(o.reshape(B, T, nh * hd))


class GatedDeltaNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        E, S, Hk, Hv, K = c["n_embd"], c["ssm_state"], c["ssm_groups"], c["ssm_heads"], c["ssm_conv"]
        self.c = c
        self.conv_dim = 2 * S * Hk + S * Hv
        self.qkv = nn.Linear(E, self.conv_dim, bias=False)
        self.gate = nn.Linear(E, S * Hv, bias=False)
        self.beta = nn.Linear(E, Hv, bias=False)
        self.alpha = nn.Linear(E, Hv, bias=False)
        self.conv = nn.Parameter(torch.empty(self.conv_dim, K))
        self.dt_bias = nn.Parameter(torch.empty(Hv))
        self.A_log = nn.Parameter(torch.empty(Hv))
        self.norm = nn.Parameter(torch.ones(S))
        self.out = nn.Linear(S * Hv, E, bias=False)

    def forward(self, u):
        B, T, _ = u.shape
        S, Hk, Hv, K = self.c["ssm_state"], self.c["ssm_groups"], self.c["ssm_heads"], self.c["ssm_conv"]
        mixed = self.qkv(u)
        z = self.gate(u).view(B, T, Hv, S)
        beta = torch.sigmoid(self.beta(u))
        g = F.softplus(self.alpha(u) + self.dt_bias) * (-torch.exp(self.A_log))  # [B, T, Hv], <= 0
        # causal depthwise conv: y_t = sum_m w[m] * x_{t-(K-1)+m}
        y = F.conv1d(F.pad(mixed.transpose(1, 2), (K - 1, 0)), self.conv.unsqueeze(1), groups=self.conv_dim)
        y = F.silu(y).transpose(1, 2)
        kd = S * Hk
        q = l2_norm(y[..., :kd].reshape(B, T, Hk, S))
        k = l2_norm(y[..., kd:2 * kd].reshape(B, T, Hk, S))
        v = y[..., 2 * kd:].reshape(B, T, Hv, S)
        # value head h reads key head h mod Hk (tiled, as llama.cpp broadcasts)
        q = q.repeat(1, 1, Hv // Hk, 1) * (1.0 / math.sqrt(S))
        k = k.repeat(1, 1, Hv // Hk, 1)
        decay = torch.exp(g)
        M = torch.zeros(B, Hv, S, S, dtype=u.dtype)  # M[i][j]: i key index, j value index
        outs = []
        # unbind once: indexing [:, t] inside the loop would make autograd scatter every step's gradient into
        # a full-size zero tensor (quadratic in T)
        ks, qs, vs = k.unbind(1), q.unbind(1), v.unbind(1)
        ds, bs = decay[..., None, None].unbind(1), beta[..., None].unbind(1)
        for t in range(T):
            kt = ks[t]
            M = M * ds[t]
            r = (kt[..., None, :] @ M).squeeze(-2)  # r[j] = sum_i k[i] M[i][j]
            d = (vs[t] - r) * bs[t]
            M = M + kt[..., :, None] * d[..., None, :]
            outs.append((qs[t][..., None, :] @ M).squeeze(-2))
        o = torch.stack(outs, dim=1)  # [B, T, Hv, S]
        o = rms_norm(o, self.norm) * F.silu(z)
        return self.out(o.reshape(B, T, Hv * S))


class Block(nn.Module):
    def __init__(self, c, recurrent):
        super().__init__()
        self.attn_norm = nn.Parameter(torch.ones(c["n_embd"]))
        self.post_norm = nn.Parameter(torch.ones(c["n_embd"]))
        self.recurrent = recurrent
        self.mixer = GatedDeltaNet(c) if recurrent else Attention(c)
        self.ffn = FFN(c)

    def forward(self, x):
        h = x + self.mixer(rms_norm(x, self.attn_norm))
        return h + self.ffn(rms_norm(h, self.post_norm))


class Model(nn.Module):
    def __init__(self, c, n_vocab):
        super().__init__()
        self.c = c
        E = c["n_embd"]
        self.embed = nn.Parameter(torch.empty(n_vocab, E))
        self.blocks = nn.ModuleList([Block(c, (i + 1) % c["interval"] != 0) for i in range(c["n_layer"])])
        self.out_norm = nn.Parameter(torch.ones(E))
        if c["mtp"]:
            self.mtp_enorm = nn.Parameter(torch.ones(E))
            self.mtp_hnorm = nn.Parameter(torch.ones(E))
            self.mtp_eh = nn.Linear(2 * E, E, bias=False)
            self.mtp_block = Block(c, False)
            self.mtp_head_norm = nn.Parameter(torch.ones(E))

    def init_weights(self, gen):
        n_res = 2 * (self.c["n_layer"] + self.c["mtp"])
        for name, p in self.named_parameters():
            if p.dim() == 2 and name != "embed":
                std = 0.02 / math.sqrt(n_res) if name.endswith(("o.weight", "out.weight", "down.weight")) else 0.02
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=gen) * std)
        with torch.no_grad():
            self.embed.copy_(torch.randn(self.embed.shape, generator=gen) * 0.02)
            for m in self.modules():
                if isinstance(m, GatedDeltaNet):
                    K = m.c["ssm_conv"]
                    m.conv.copy_((torch.rand(m.conv.shape, generator=gen) * 2 - 1) / math.sqrt(K))
                    dt = torch.exp(torch.rand(m.dt_bias.shape, generator=gen) * (math.log(0.1) - math.log(0.001))
                                   + math.log(0.001))
                    m.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
                    m.A_log.copy_(torch.log(torch.rand(m.A_log.shape, generator=gen) * 15 + 1))

    def forward(self, tokens):
        """tokens [B, T+1]. Returns (main loss, mtp loss or None)."""
        inp = tokens[:, :-1]
        x = F.embedding(inp, self.embed)
        for b in self.blocks:
            x = b(x)
        h = rms_norm(x, self.out_norm)  # what llama.cpp hands the MTP head (h_nextn)
        logits = h @ self.embed.t()
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        if not self.c["mtp"]:
            return loss, None
        # MTP: at position i, combine h_i with the embedding of token i+1 to predict token i+2
        e = F.embedding(tokens[:, 1:-1], self.embed)
        m = self.mtp_eh(torch.cat([rms_norm(e, self.mtp_enorm), rms_norm(h[:, :-1], self.mtp_hnorm)], dim=-1))
        m = self.mtp_block(m)
        ml = rms_norm(m, self.mtp_head_norm) @ self.embed.t()
        mloss = F.cross_entropy(ml.reshape(-1, ml.shape[-1]), tokens[:, 2:].reshape(-1))
        return loss, mloss


def count_params(model, trunk_only=False):
    n = 0
    for name, p in model.named_parameters():
        if trunk_only and name.startswith("mtp_"):
            continue
        n += p.numel()
    return n


# ---- export ------------------------------------------------------------------------------------------------

def export_gguf(model, tok, path, name, oracle_src, f32=False):
    """Writes the model with gguf-py (llama.cpp's own GGUF writer, from the oracle's source tree): 2-D
    matrices Q8_0, 1-D tensors and conv kernels F32."""
    sys.path.insert(0, os.path.join(oracle_src, "gguf-py"))
    import gguf
    import numpy as np

    c = model.c
    arch = "qwen35"
    n_layer = c["n_layer"]
    w = gguf.GGUFWriter(path, arch)
    w.add_string("general.name", name)
    w.add_string("general.license", "public-domain text (KJV) and BSD fortunes; see train/SOURCES.md")
    w.add_uint32(arch + ".context_length", 4096)
    w.add_uint32(arch + ".embedding_length", c["n_embd"])
    w.add_uint32(arch + ".block_count", n_layer + c["mtp"])
    if c["mtp"]:
        w.add_uint32(arch + ".nextn_predict_layers", c["mtp"])
    w.add_uint32(arch + ".feed_forward_length", c["n_ff"])
    w.add_uint32(arch + ".attention.head_count", c["n_head"])
    w.add_uint32(arch + ".attention.head_count_kv", c["n_head_kv"])
    w.add_uint32(arch + ".attention.key_length", c["head_dim"])
    w.add_uint32(arch + ".attention.value_length", c["head_dim"])
    w.add_uint32(arch + ".rope.dimension_count", c["n_rot"])
    w.add_array(arch + ".rope.dimension_sections", c["sections"])
    w.add_float32(arch + ".rope.freq_base", ROPE_BASE)
    w.add_float32(arch + ".attention.layer_norm_rms_epsilon", EPS)
    w.add_uint32(arch + ".ssm.conv_kernel", c["ssm_conv"])
    w.add_uint32(arch + ".ssm.state_size", c["ssm_state"])
    w.add_uint32(arch + ".ssm.group_count", c["ssm_groups"])
    w.add_uint32(arch + ".ssm.time_step_rank", c["ssm_heads"])
    w.add_uint32(arch + ".ssm.inner_size", c["ssm_state"] * c["ssm_heads"])
    w.add_uint32(arch + ".full_attention_interval", c["interval"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen35")
    w.add_token_list(tok.tokens)
    w.add_token_types([3 if t in SPECIALS else 1 for t in tok.tokens])
    w.add_token_merges(["%s %s" % p for p in tok.merges])
    w.add_bos_token_id(tok.special("<|endoftext|>"))
    w.add_eos_token_id(tok.special("<|im_end|>"))
    w.add_pad_token_id(tok.special("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def put(tname, t):
        a = t.detach().float().contiguous().numpy().astype(np.float32)
        if a.ndim == 2 and not f32 and not tname.endswith("ssm_conv1d.weight"):
            q = gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(tname, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(tname, a)

    def put_block(il, b):
        put("blk.%d.attn_norm.weight" % il, b.attn_norm)
        put("blk.%d.post_attention_norm.weight" % il, b.post_norm)
        put("blk.%d.ffn_gate.weight" % il, b.ffn.gate.weight)
        put("blk.%d.ffn_up.weight" % il, b.ffn.up.weight)
        put("blk.%d.ffn_down.weight" % il, b.ffn.down.weight)
        m = b.mixer
        if b.recurrent:
            put("blk.%d.attn_qkv.weight" % il, m.qkv.weight)
            put("blk.%d.attn_gate.weight" % il, m.gate.weight)
            put("blk.%d.ssm_conv1d.weight" % il, m.conv)
            put("blk.%d.ssm_dt.bias" % il, m.dt_bias)
            put("blk.%d.ssm_a" % il, -torch.exp(m.A_log))
            put("blk.%d.ssm_beta.weight" % il, m.beta.weight)
            put("blk.%d.ssm_alpha.weight" % il, m.alpha.weight)
            put("blk.%d.ssm_norm.weight" % il, m.norm)
            put("blk.%d.ssm_out.weight" % il, m.out.weight)
        else:
            put("blk.%d.attn_q.weight" % il, m.q.weight)
            put("blk.%d.attn_k.weight" % il, m.k.weight)
            put("blk.%d.attn_v.weight" % il, m.v.weight)
            put("blk.%d.attn_output.weight" % il, m.o.weight)
            put("blk.%d.attn_q_norm.weight" % il, m.q_norm)
            put("blk.%d.attn_k_norm.weight" % il, m.k_norm)

    put("token_embd.weight", model.embed)
    put("output_norm.weight", model.out_norm)
    for il, b in enumerate(model.blocks):
        put_block(il, b)
    if c["mtp"]:
        il = n_layer
        put_block(il, model.mtp_block)
        put("blk.%d.nextn.eh_proj.weight" % il, model.mtp_eh.weight)
        put("blk.%d.nextn.enorm.weight" % il, model.mtp_enorm)
        put("blk.%d.nextn.hnorm.weight" % il, model.mtp_hnorm)
        put("blk.%d.nextn.shared_head_norm.weight" % il, model.mtp_head_norm)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---- training loop -----------------------------------------------------------------------------------------

def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def train_model(tag, c, stream, n_vocab, steps, batch, seq, peak_lr, seed, work, log):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = Model(c, n_vocab)
    model.init_weights(gen)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=peak_lr, betas=(0.9, 0.95), eps=1e-8)
    ckpt = os.path.join(work, "%s.ckpt" % tag)
    start = 0
    if os.path.exists(ckpt):
        st = torch.load(ckpt)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        start = st["step"]
        print("%s: resumed at step %d" % (tag, start), flush=True)
    print("%s: %d parameters (%d without the MTP block)" % (tag, count_params(model), count_params(model, True)),
          flush=True)
    n = stream.numel()
    t0 = time.time()
    logf = open(log, "a")
    for step in range(start, steps):
        g = torch.Generator().manual_seed(seed * 1000003 + step)
        offs = torch.randint(0, n - seq - 1, (batch,), generator=g)
        xb = torch.stack([stream[o:o + seq + 1] for o in offs.tolist()])
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step, steps, peak_lr, max(1, steps // 20))
        loss, mloss = model(xb)
        total = loss + (0.3 * mloss if mloss is not None else 0)
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        line = "%s\t%d\t%.4f\t%s\t%.1f" % (tag, step, loss.item(), "%.4f" % mloss.item() if mloss is not None
                                          else "-", time.time() - t0)
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()
        if (step + 1) % 20 == 0 or step + 1 == steps:
            tmp = ckpt + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1}, tmp)
            os.replace(tmp, ckpt)
    logf.close()
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True, help="scratch directory (tokenizer cache, checkpoints, log)")
    ap.add_argument("--out", required=True, help="where the GGUF files, held-out text and word list go")
    ap.add_argument("--oracle-src", default=os.path.expanduser("~/.cache/braid/oracle/3.22.1/src"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--draft-steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--dev", action="store_true", help="a one-minute smoke run: tiny steps and sequence")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)

    chapters = read_bible()
    fortunes = read_fortunes()
    train_ch = [ch for i, ch in enumerate(chapters) if i % HELDOUT_EVERY != HELDOUT_EVERY // 2]
    held_ch = [ch for i, ch in enumerate(chapters) if i % HELDOUT_EVERY == HELDOUT_EVERY // 2]
    held_f = [f for i, f in enumerate(fortunes) if i % HELDOUT_EVERY == HELDOUT_EVERY // 2]
    train_f = [f for i, f in enumerate(fortunes) if i % HELDOUT_EVERY != HELDOUT_EVERY // 2]

    def chapter_text(ch):
        return "\n".join(ch[2]) + "\n"

    docs = [chapter_text(ch) for ch in train_ch] + [f + "\n" for f in train_f]
    dialogues = build_dialogues(train_ch, train_f, rng)
    with open(os.path.join(a.out, "heldout.txt"), "w") as f:
        f.write("".join(chapter_text(ch) + "\n" for ch in held_ch))
        f.write("".join(x + "\n\n" for x in held_f))
    words = set()
    for d in docs:
        words.update(regex.findall(r"[a-z]+", d.lower()))
    for dl in dialogues:
        for _, t in dl:
            words.update(regex.findall(r"[a-z]+", t.lower()))
    with open(os.path.join(a.out, "words.txt"), "w") as f:
        f.write("".join(w + "\n" for w in sorted(words)))

    tok_path = os.path.join(a.work, "merges.json")
    if os.path.exists(tok_path):
        with open(tok_path) as f:
            merges = [tuple(p) for p in json.load(f)]
    else:
        t0 = time.time()
        n_merges = a.vocab - 256 - len(SPECIALS)
        merges = train_bpe(docs + [t for dl in dialogues for _, t in dl], n_merges)
        with open(tok_path, "w") as f:
            json.dump(merges, f)
        print("tokenizer: %d merges in %.1f s" % (len(merges), time.time() - t0), flush=True)
    tok = Tokenizer(merges)
    eot, ims, ime = (tok.special(s) for s in SPECIALS)
    nl = tok.encode("\n")

    # one stream of documents in a seeded order, each ended by <|endoftext|>
    items = [("doc", d) for d in docs] + [("chat", dl) for dl in dialogues]
    rng.shuffle(items)
    ids = []
    for kind, x in items:
        if kind == "doc":
            ids.extend(tok.encode(x))
        else:
            for role, text in x:
                ids.append(ims)
                ids.extend(tok.encode(role + "\n" + text))
                ids.append(ime)
                ids.extend(nl)
        ids.append(eot)
    stream = torch.tensor(ids, dtype=torch.long)
    print("corpus: %d training tokens, %d docs, %d dialogues, vocab %d" % (len(ids), len(docs), len(dialogues),
                                                                         len(tok.tokens)), flush=True)

    seq = 32 if a.dev else N_CTX_TRAIN
    main_c, draft_c = dict(MAIN), dict(DRAFT)
    log = os.path.join(a.work, "curve.tsv")
    t0 = time.time()
    model = train_model("main", main_c, stream, len(tok.tokens), a.steps, a.batch, seq, 2e-3, a.seed, a.work, log)
    t_main = time.time() - t0
    export_gguf(model, tok, os.path.join(a.out, "kjv-qwen35-q8_0.gguf"), "braid default (KJV qwen35)",
                a.oracle_src)
    t0 = time.time()
    draft = train_model("draft", draft_c, stream, len(tok.tokens), a.draft_steps, a.batch, seq, 3e-3, a.seed + 1,
                        a.work, log)
    t_draft = time.time() - t0
    export_gguf(draft, tok, os.path.join(a.out, "kjv-qwen35-draft-q8_0.gguf"), "braid default draft (KJV qwen35)",
                a.oracle_src)
    print("done: main %d params (%.0f s), draft %d params (%.0f s)" % (count_params(model), t_main,
                                                                       count_params(draft), t_draft), flush=True)


if __name__ == "__main__":
    main()
