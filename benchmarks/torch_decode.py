"""Benchmark pipeline: a PyTorch `Dataset` that decodes each item on the CPU (decompress, then
normalise and blur a small image), under a `DataLoader` with `num_workers=0` as written.

Every item costs CPU, not waiting: workers help until the cores are busy, and the train step
then competes with them for the same cores. PyTorch's rule (`num_workers` = cores) is close
to right here; tfperf should match it or do better (fewer workers and trainer threads that
leave the step a core, a larger prefetch).

    tfperf profile benchmarks/torch_decode.py
"""

from __future__ import annotations

import zlib

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BASELINE = {"batch_size": 32, "num_workers": 0}

ITEMS = 2048
SIZE = 48  # images of SIZE x SIZE x 3 bytes, stored compressed
CLASSES = 10
BLUR_PASSES = 24  # about 2 ms of CPU per item on a 2-core machine


class CompressedImages(Dataset):
    """Images kept zlib-compressed in memory and decoded per item, as JPEG files would be."""

    def __init__(self) -> None:
        rng = np.random.default_rng(2)
        base = rng.integers(0, 255, size=(SIZE, SIZE, 3), dtype=np.uint8)
        self.blobs = [
            zlib.compress(np.roll(base, index, axis=0).tobytes(), 6) for index in range(ITEMS)
        ]
        self.labels = rng.integers(0, CLASSES, size=ITEMS)

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, index: int):
        raw = np.frombuffer(zlib.decompress(self.blobs[index]), np.uint8)
        image = raw.reshape(SIZE, SIZE, 3).astype(np.float32) / 255.0
        for _ in range(BLUR_PASSES):  # a 3x3 box blur: the decode's arithmetic
            padded = np.pad(image, ((1, 1), (1, 1), (0, 0)), mode="edge")
            image = (
                sum(padded[dy : dy + SIZE, dx : dx + SIZE] for dy in range(3) for dx in range(3))
                / 9.0
            )
        tensor = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))
        return tensor, int(self.labels[index])


def make_loader(knobs):
    return DataLoader(CompressedImages(), batch_size=knobs.batch_size, shuffle=True)


def make_train_step(knobs):
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=4),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, CLASSES),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step(batch):
        images, labels = batch
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return train_step
