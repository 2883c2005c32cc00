#!/usr/bin/env python3
"""Reference outputs of PyTorch's nn.LSTM and nn.GRU for tests/test_rnn.c.

Run with /usr/bin/python3 and torch (Debian python3-torch 1.13 made the numbers embedded there): prints the C arrays. Every value
comes from a formula that test_rnn.c computes the same way, so no weights need embedding:
  parameter k (in named_parameters order), element j:  0.5 sin(0.7 j + 1.3 k + 0.1)
  input x (B,T,in) element j:                          cos(0.45 j + 0.2)
  h0 (L,B,H) element j: 0.3 sin(0.9 j + 0.5);          c0 element j: 0.3 cos(0.8 j + 0.1)
(each computed in float64, then rounded to float32).
"""
import math
import torch

B, T, IN, H, L = 2, 4, 3, 5, 2


def fill(shape, f):
    n = math.prod(shape)
    return torch.tensor([f(j) for j in range(n)], dtype=torch.float64).float().reshape(shape)


def run(cls, with_state):
    torch.manual_seed(0)
    m = cls(IN, H, num_layers=L, batch_first=True)
    with torch.no_grad():
        for k, (_, p) in enumerate(m.named_parameters()):
            p.copy_(fill(tuple(p.shape), lambda j, k=k: 0.5 * math.sin(0.7 * j + 1.3 * k + 0.1)))
    x = fill((B, T, IN), lambda j: math.cos(0.45 * j + 0.2))
    h0 = fill((L, B, H), lambda j: 0.3 * math.sin(0.9 * j + 0.5))
    c0 = fill((L, B, H), lambda j: 0.3 * math.cos(0.8 * j + 0.1))
    with torch.no_grad():
        if cls is torch.nn.LSTM:
            y, (hn, cn) = m(x, (h0, c0)) if with_state else m(x)
        else:
            y, hn = m(x, h0) if with_state else m(x)
            cn = None
    return y, hn, cn


def emit(name, t):
    vals = ", ".join("%.8ef" % v for v in t.flatten().tolist())
    print("static const float %s[%d] = {%s};" % (name, t.numel(), vals))


for cls, tag in ((torch.nn.LSTM, "lstm"), (torch.nn.GRU, "gru")):
    for with_state in (False, True):
        y, hn, cn = run(cls, with_state)
        suffix = "_state" if with_state else ""
        emit("%s%s_y" % (tag, suffix), y)
        emit("%s%s_hn" % (tag, suffix), hn)
        if cn is not None:
            emit("%s%s_cn" % (tag, suffix), cn)
