#!/usr/bin/python3
"""check_export.py — checks that train.py's PyTorch forward pass computes what llama.cpp computes on the
exported file: random weights with a large spread (so every part of the block matters), exported as F32,
logits of a fixed token sequence from PyTorch and from llama.cpp (the oracle driver) compared. The main-model
config with its MTP block (which llama.cpp must accept and skip) and the draft config are both checked.

usage: /usr/bin/python3 train/check_export.py BUILD_DIR"""
import os
import struct
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train as T  # noqa: E402


def main():
    build = sys.argv[1]
    torch.manual_seed(7)
    merges = [("Ġ", "t"), ("h", "e")]
    tok = T.Tokenizer(merges)
    worst = 0.0
    for tag, c in (("main", T.MAIN), ("draft", T.DRAFT)):
        m = T.Model(dict(c), len(tok.tokens))
        m.init_weights(torch.Generator().manual_seed(3))
        with torch.no_grad():
            for n, p in m.named_parameters():
                if p.dim() == 2:
                    p.mul_(8.0)  # std 0.16: far from the near-uniform logits of a fresh init
                elif n.endswith("norm") or n.endswith("_norm"):
                    p.add_(torch.randn(p.shape) * 0.3)
        T_ = 40
        toks = torch.randint(0, len(tok.tokens), (1, T_ + 1))
        with torch.no_grad():
            x = T.F.embedding(toks[:, :-1], m.embed)
            for b in m.blocks:
                x = b(x)
            ref = (T.rms_norm(x, m.out_norm) @ m.embed.t())[0]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.gguf")
            T.export_gguf(m, tok, path, "check", os.path.expanduser("~/.cache/braid/oracle/3.22.1/src"), f32=True)
            p = subprocess.Popen([os.path.join(build, "tests", "oracle"), "-m", path, "--ctx", "64"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            lines = ["decode %d" % T_] + ["%d %d 0 1" % (toks[0, i].item(), i) for i in range(T_)] + ["quit"]
            p.stdin.write(("\n".join(lines) + "\n").encode())
            p.stdin.flush()
            head = p.stdout.readline().decode().split()
            assert head[0] == "ok", head
            R, V = int(head[1]), int(head[2])
            got = torch.tensor(struct.unpack("<%df" % (R * V), p.stdout.read(4 * R * V))).view(R, V)
            p.communicate()
        diff = (got - ref).abs().max().item()
        scale = ref.abs().max().item()
        print("%s: max |logit diff| %.3g (logits up to %.3g), argmax agree %d/%d" %
              (tag, diff, scale, (got.argmax(-1) == ref.argmax(-1)).sum().item(), T_))
        worst = max(worst, diff / scale)
    print("worst relative difference %.3g" % worst)
    sys.exit(0 if worst < 1e-3 else 1)


if __name__ == "__main__":
    main()
