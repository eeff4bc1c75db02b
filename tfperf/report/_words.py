"""How knob values read to a person in a report: an unset knob says what tf.data does instead."""

from __future__ import annotations

from typing import Any

from tfperf.knobs import KNOBS, format_value
from tfperf.knobs.declare import Applier

#: The one word for a knob left unset, wherever a report shows it (tables, hovers, axes,
#: the changes against the baseline); the knob's declaration adds what tf.data does instead.
UNSET = "not set"


def knob_value(value: Any, name: str = "") -> str:
    """A knob's value as a person reads it; an unset one says what tf.data does instead.

    `name` is a knob (its declaration's `unset` words say what tf.data does), or a call site
    or a name read from a stored file, which have no words; empty when the value is shown
    without its name.
    """
    if value is None:
        default = KNOBS[name].unset if name in KNOBS.names() else None
        if default and KNOBS[name].applied_by in _OWN_WORDS:
            return f"{UNSET} ({default})"  # "as make_loader wrote it": not tf.data's to say
        return f"{UNSET} (tf.data's default: {default})" if default else UNSET
    return format_value(value)


#: Appliers whose knobs' `unset` words stand alone: a DataLoader's, a trainer's.
_OWN_WORDS = frozenset({Applier.DATALOADER, Applier.TRAINER})
