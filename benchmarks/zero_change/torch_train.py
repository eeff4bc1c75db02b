"""An ordinary PyTorch training script: its own loop over a `DataLoader`, no tfperf in it.

Each item of its `Dataset` blocks for 2 ms (a read from remote storage), and the loader is
written with `num_workers=0`, so the loop waits on one read at a time. `tfperf tune
--write-patch` finds the `DataLoader(...)` call, tunes its arguments and hands them back as a
patch of this file; `benchmarks/torch_script.py` measures the patched file against this one.

    tfperf tune benchmarks/zero_change/torch_train.py --write-patch -- --epochs 1
"""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

FEATURES = 64
CLASSES = 10


class RemoteRecords(Dataset):
    """Records fetched one by one, each fetch blocking for 2 ms."""

    def __len__(self):
        return 4096

    def __getitem__(self, index):
        time.sleep(0.002)
        generator = torch.Generator().manual_seed(index)
        return torch.randn(FEATURES, generator=generator), index % CLASSES


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    loader = DataLoader(RemoteRecords(), batch_size=32, shuffle=True, num_workers=0)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 128), torch.nn.ReLU(), torch.nn.Linear(128, CLASSES)
    )
    optimizer = torch.optim.Adam(model.parameters())
    for _ in range(args.epochs):
        for features, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()
