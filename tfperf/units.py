"""How quantities read to a person: bytes in binary units, durations in ms or s."""

from __future__ import annotations


def format_bytes(count: float) -> str:
    """Binary units, three significant figures: "1.5 GiB", "512 MiB", "1 GiB"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024:
            return f"{count:.3g} {unit}"
        count /= 1024
    return f"{count:.3g} TiB"


def format_seconds(seconds: float) -> str:
    """Milliseconds below a second ("36.2 ms"), seconds above ("1.23 s")."""
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"
