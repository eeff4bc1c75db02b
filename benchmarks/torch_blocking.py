"""Benchmark pipeline: a PyTorch `Dataset` whose items block ~2 ms each, as reads from object
storage do, under a `DataLoader` with `num_workers=0` as written.

Each item sleeps its latency (2-4 ms, fixed per index; `time.sleep` waits as a socket read
does) and then builds a small tensor, so the CPU is mostly idle and the useful number of
workers is set by the latency, not by the cores. PyTorch's rule (`num_workers` = cores) keeps
only as many reads in flight as there are cores.

    tfperf profile benchmarks/torch_blocking.py
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BASELINE = {"batch_size": 32, "num_workers": 0}

ITEMS = 4096
FEATURES = 64
LATENCY_S = (0.002, 0.004)  # per-item latency, uniform in this range


class ObjectReads(Dataset):
    """Items that wait their latency, then decode to a feature vector and a target."""

    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        self.latency = rng.uniform(*LATENCY_S, size=ITEMS)

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, index: int):
        time.sleep(self.latency[index])
        features = torch.from_numpy(np.random.default_rng(index).standard_normal(FEATURES))
        features = features.float()
        return features, features.mean().unsqueeze(0)


def make_loader(knobs):
    return DataLoader(ObjectReads(), batch_size=knobs.batch_size, shuffle=True)


def make_train_step(knobs):
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step(batch):
        features, targets = batch
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(features), targets)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return train_step
