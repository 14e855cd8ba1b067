"""Small PyTorch models in the shapes of real blocks, for the Python API's
tests: a GPT-2 block (attention written out, causal mask as a buffer, tanh
GELU), a Llama block (RMS norm written out, SwiGLU), and CNNs."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GPT2Block(nn.Module):
    def __init__(self, d=64, heads=4, seq=32):
        super().__init__()
        self.h, self.d = heads, d
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(self.d, dim=2)
        q = q.view(b, t, self.h, c // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, c // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, c // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.h))
        att = att + self.mask
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.c_proj(y)
        x = x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
        return x


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    def __init__(self, d=64, heads=4, hidden=172):
        super().__init__()
        self.h = heads
        self.norm1 = RMSNorm(d)
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.norm2 = RMSNorm(d)
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        hd = c // self.h
        h = self.norm1(x)
        q = self.wq(h).view(b, t, self.h, hd).transpose(1, 2)
        k = self.wk(h).view(b, t, self.h, hd).transpose(1, 2)
        v = self.wv(h).view(b, t, self.h, hd).transpose(1, 2)
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd)
        p = torch.softmax(s, dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(b, t, c)
        x = x + self.wo(o)
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)) + x)
        return self.fc(torch.flatten(self.gap(x), 1))
