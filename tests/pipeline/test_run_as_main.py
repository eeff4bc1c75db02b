"""`pipeline.run_as_main`: a script's code runs in a module that is `__main__` for the block."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from tfperf.pipeline import run_as_main

SCRIPT = """\
import sys


class Item:
    pass


seen = (__name__, sys.argv[1:], __file__)
"""


def test_the_script_is_main_until_the_block_ends_and_a_block_inside_shares_it(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    before = sys.modules["__main__"]
    with run_as_main(script, ["--epochs", "3"]) as run:
        run()
        main = sys.modules["__main__"]
        assert main.seen == ("__main__", ["--epochs", "3"], str(script.resolve()))
        item = main.Item()
        with run_as_main(script, []) as again:  # the profile's script run, inside the profile
            assert sys.modules["__main__"] is main
            again()
        assert sys.modules["__main__"] is main
        assert isinstance(pickle.loads(pickle.dumps(main.Item())), main.Item)  # by __main__.Item
        assert type(item) is not main.Item  # the run inside ran the code again, in that module
    assert sys.modules["__main__"] is before
    assert sys.argv[1:] != ["--epochs", "3"]
