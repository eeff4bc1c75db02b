"""The `DataLoader(...)` calls in a user's own files: found and overridden while a script runs,
and patched.

`recording(root, overrides)` wraps `torch.utils.data.DataLoader.__init__` for a block. Each
construction is traced to the frame that made it:

- a frame in the user's files (under `root`, not site-packages) whose call is written
  `DataLoader(...)` is a *call site*: each tuned argument (`num_workers`, `batch_size`,
  `pin_memory`, `persistent_workers`, `prefetch_factor`; `tfperf.knobs.TUNABLE`) is recorded
  as written (keyword, positional or left out, with the call's span from Python 3.11's
  positions) and becomes a site knob, `DataLoader@train.py:40.num_workers`; an override for
  that name replaces the value before the `DataLoader` sees it. When an override leaves the
  loader with no workers, `persistent_workers` and `prefetch_factor` (which need workers) go
  back to their defaults, so a trial never builds a loader torch refuses. An argument written
  `args.workers` whose value is an argparse option's default is the option's site instead
  (`_arguments`: tuned and patched at its `add_argument(default=...)`);
- any other frame is a library's (Lightning's `Trainer.fit`, Hugging Face's `Trainer`, which
  build their loaders inside): listed as not tunable here, with the user's line that reached
  it, since tfperf rewrites only the user's files. Reached from the user's code, its loader
  may still be measured (`measurable`), and its arguments that trace back to the user's
  options' defaults are sites at those options, overridden where the library makes it.

`TorchSites` is the framework's `CallSites`: `find` runs the script up to its loop's first
batch and returns the `Discovery`; `patch` writes a measured configuration back as a unified
diff (through `tfperf.sites`), the `DataLoader`'s arguments rewritten and, where the trainer's
threads were measured (`torch_threads`), `torch.set_num_threads(n)` added after the file's
imports. From the script's folder, `patch -p0 < train.py.patch` applies it.

Not thread-safe: the wrapped `__init__` is process-wide.

Example:
    >>> with recording(Path("."), {"DataLoader@train.py:40.num_workers": 4}) as recorder:
    ...     runpy.run_path("train.py")  # doctest: +SKIP
    >>> recorder.discovery().sites  # doctest: +SKIP
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import inspect
import os
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tfperf.frameworks import Seen, SiteRecorder, call_span
from tfperf.frameworks.torch._anew import built_anew
from tfperf.frameworks.torch._arguments import (
    Option,
    Options,
    recording_options,
    trace,
    trace_own,
)
from tfperf.frameworks.torch._places import CALL, Place, calls_in
from tfperf.frameworks.torch._torch import WORKER_ONLY
from tfperf.knobs import KNOBS, TUNABLE, Knobs, SiteKind, SiteValues
from tfperf.knobs.declare import Applier, as_run
from tfperf.results.discovery import ArgumentForm, CallSite, Discovery, Untunable
from tfperf.sites import (
    Additions,
    Anchor,
    Patch,
    callee,
    changes_between,
    make_patch,
    name_line,
    placement_problem,
)
from tfperf.tracebacks import is_user_file, user_frame

#: The knob of the trainer's intra-op threads (`torch.set_num_threads`), as `Knobs.to_dict`
#: writes it; the patch adds the call where a measured configuration sets it.
THREADS_KNOB = "torch_threads"
#: The arguments tuned at a call: `(argument, kind, tuned when the call leaves it out)`.
ARGUMENTS = tuple((a, kind, absent) for (m, a), (kind, absent) in TUNABLE.items() if m == CALL)
#: The framework's knobs that `make_loader` reads or its loader is rebuilt with (a script's
#: loader takes its values at its call instead).
LOADER_KNOBS = KNOBS.where(
    lambda k: "torch" in k.frameworks and k.applied_by in (Applier.CODE, Applier.DATALOADER)
)
#: The DataLoader's own defaults of the arguments tuned.
_DEFAULTS = {
    "num_workers": 0,
    "batch_size": 1,
    "pin_memory": False,
    "persistent_workers": False,
    "prefetch_factor": None,
}


@dataclasses.dataclass
class _Seen(Seen):
    place: Place  # with the call the value is written in
    calls: int = 1


class LoaderRecorder(SiteRecorder):
    """Collects the `DataLoader` calls of one run and applies `overrides` (site -> value)."""

    calls = f"{CALL} call"
    during = "the script runs"

    def __init__(self, root: Path, overrides: Mapping[str, int | None]) -> None:
        super().__init__(root, overrides)
        self._seen: dict[tuple[Place, str], _Seen] = {}
        self._places: dict[int, Place] = {}  # id of a loader made in the user's files -> place
        # id of a loader a library made -> the user's line that reached it
        self._reached: dict[int, str] = {}
        # id of a loader -> the places of the options its arguments were traced to
        self._traced: dict[int, frozenset[Place]] = {}
        self._untunable: dict[tuple[str, str], Untunable] = {}
        self.options = Options(self.root)  # the user's argparse options, as they are added
        self._loaders: list[Any] = []  # keeps each loader alive, so its id stays its own
        self._iterated: set[int] = set()  # ids of the loaders the script has iterated

    def place_of(self, loader: Any) -> Place | None:
        """Where `loader` was made, when it was made in the user's files by a site."""
        return self._places.get(id(loader))

    def built_anew(self, loader: Any) -> str | None:
        """The loop of the user's that builds `loader` anew for each of its passes
        (`_anew.built_anew`); None where it is built once or the syntax does not say."""
        place = self.place_of(loader)
        return None if place is None else built_anew(self.root / place.file, place.line)

    def measurable(self, loader: Any) -> bool:
        """Whether tfperf may measure `loader`: made by a call in the user's files, or by a
        library the user's code called (its values tuned only where traced to an option)."""
        return id(loader) in self._places or id(loader) in self._reached

    def iterated(self, loader: Any) -> None:
        """Notes that the script iterated `loader`."""
        self._iterated.add(id(loader))

    def evaluates_first(self, loader: Any) -> bool:
        """Whether `iter(loader)` is an evaluation pass ahead of training, which tfperf lets
        run unmeasured: gradients are off (`torch.no_grad`, `torch.inference_mode`) and
        another loader tfperf may measure was made and not iterated yet, for the training
        loop to reach. A script that only evaluates has no such other loader, and its first
        is measured as ever."""
        import torch

        if torch.is_grad_enabled():
            return False
        return any(
            other is not loader and self.measurable(other) and id(other) not in self._iterated
            for other in self._loaders
        )

    def discovery(self, measured: Any = None) -> Discovery:
        """The sites (in file order) and untunable calls; with `measured` (the loader tfperf
        measures), only its sites: another loader of the user's is listed as not tunable.

        `end` is where the measured loader is made, or for a library's, the user's line
        that reached it.
        """
        keep, end = self._kept(measured)
        sites: list[CallSite] = []
        untunable = list(self._untunable.values())
        others: set[Place] = set()
        for seen in sorted(self._seen.values(), key=lambda s: (s.place.file, s.place.line)):
            if keep is not None and seen.place not in keep:
                others.add(seen.place)
                continue
            reason = seen.problem or _varies(seen.values)
            if reason:
                untunable.append(Untunable(_call_text(seen), str(seen.place), None, reason))
            else:
                sites.append(_site(seen))
        for place in sorted(others, key=lambda p: (p.file, p.line)):
            reason = "not the loader tfperf measures (the first one the training loop iterates)"
            untunable.append(Untunable(f"{CALL}(...)", str(place), None, reason))
        return Discovery(sites=tuple(sites), untunable=tuple(untunable), end=end)

    def _kept(self, measured: Any) -> tuple[frozenset[Place] | None, str | None]:
        """The places of the measured loader's sites (None: every place), and its `end`."""
        if measured is None:
            return None, None
        traced = self._traced.get(id(measured), frozenset())
        place = self.place_of(measured)
        if place is not None:
            return traced | {place}, str(place)
        return traced, self._reached.get(id(measured))

    def on_init(
        self,
        loader: Any,
        signature: inspect.Signature,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        caller: types.FrameType,
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Records one `DataLoader(...)` call and returns its arguments, overrides applied."""
        filename = caller.f_code.co_filename
        try:
            bound = signature.bind(loader, *args, **kwargs)
        except TypeError:
            return args, kwargs  # torch raises its own, clearer, error for this call
        if not is_user_file(filename, (self.root,)):
            self._library_call(loader, bound, caller)
            return bound.args[1:], bound.kwargs
        place = self._locate(filename, caller)
        if isinstance(place, str):
            where = f"{self._relative(filename)}:{caller.f_lineno}"
            self._untunable[(where, place)] = Untunable(f"{CALL}(...)", where, None, place)
            return args, kwargs
        self._places[id(loader)] = place
        self._loaders.append(loader)
        traced = self._trace(bound, caller, signature)
        self._traced[id(loader)] = frozenset(option for option, _ in traced)
        overridden = False
        for argument, kind, absent in ARGUMENTS:
            if argument in {traced_argument for _, traced_argument in traced}:
                continue  # tuned at the option whose default it is
            if argument not in bound.arguments and not absent:
                continue
            if argument == "batch_size" and bound.arguments.get("batch_sampler") is not None:
                continue  # the batch sampler makes the batches
            self._record(place, argument, kind, signature, bound, kwargs)
            overridden |= self._apply(place, argument, kind, bound)
        if overridden:
            _keep_consistent(bound)
        return bound.args[1:], bound.kwargs

    def _record(
        self,
        place: Place,
        argument: str,
        kind: SiteKind,
        signature: inspect.Signature,
        bound: inspect.BoundArguments,
        kwargs: dict[str, Any],
    ) -> None:
        if argument in kwargs:
            form, index = ArgumentForm.KEYWORD, None
        elif argument in bound.arguments:
            form = ArgumentForm.POSITIONAL
            index = list(signature.parameters).index(argument) - 1  # less `self`
        else:
            form, index = ArgumentForm.ABSENT, None
        value, problem = (
            (None, None)  # left out: the DataLoader's default, as a site holds it
            if form is ArgumentForm.ABSENT
            else _plain(bound.arguments.get(argument), argument, kind)
        )
        self._note(place, argument, form, index, value, problem)

    def _note(
        self,
        place: Place,
        argument: str,
        form: ArgumentForm,
        index: int | None,
        value: int | None,
        problem: str | None,
    ) -> None:
        """One more call of the site at `place` for `argument`, with `value`."""
        seen = self._seen.get((place, argument))
        if seen is None:
            self._seen[(place, argument)] = _Seen(place, argument, form, index, [value], problem)
        else:
            seen.calls += 1
            seen.again(value, problem)

    def _apply(
        self, place: Place, argument: str, kind: SiteKind, bound: inspect.BoundArguments
    ) -> bool:
        name = place.name(CALL, argument)
        if not self.takes(name):
            return False
        value = self.overrides[name]
        if value is None and kind is not SiteKind.FACTOR:
            bound.arguments.pop(argument, None)  # None: the DataLoader's default
        else:
            bound.arguments[argument] = bool(value) if kind is SiteKind.FLAG else value
        return True

    def _locate(self, filename: str, caller: types.FrameType) -> Place | str:
        """The call's place, or why it is no site (not written `DataLoader(...)`)."""
        _, end_line, _, end_col = call_span(caller)
        if end_line is None or end_col is None:
            return f"Python {sys.version_info[0]}.{sys.version_info[1]} gives no call columns"
        calls = calls_in(filename)
        found = [c for c in calls if (c.end_lineno, c.end_col_offset) == (end_line, end_col)]
        if not found or callee(found[0]) != CALL:
            return (
                f"the call at this line is not written `{CALL}(...)` (a subclass, or a "
                "function that makes one): tfperf rewrites only direct calls"
            )
        call = found[0]
        named = name_line(call)
        same = sorted(
            ((c.end_lineno, c.end_col_offset) for c in calls if callee(c) == CALL)
            if sum(1 for c in calls if callee(c) == CALL and name_line(c) == named) > 1
            else []
        )
        nth = same.index((end_line, end_col)) + 1 if same else None
        return Place(self._relative(filename), named, call.col_offset, end_line, end_col, nth)

    def _library_call(
        self, loader: Any, bound: inspect.BoundArguments, caller: types.FrameType
    ) -> None:
        """A loader a library makes: not tunable at its call, but measurable when the user's
        code reached it, and tuned where its arguments trace to the user's options."""
        library = _library_path(caller)
        where = f"{library}:{caller.f_lineno}"
        frame = user_frame(caller, (self.root,))
        if frame is None:
            return  # a library's own loader, reached from nothing of the user's
        reached = f"{self._relative(frame.f_code.co_filename)}:{frame.f_lineno}"
        traced = self._trace(bound, frame)
        self._reached[id(loader)] = reached
        self._traced[id(loader)] = frozenset(place for place, _ in traced)
        self._loaders.append(loader)
        reason = (
            f"made inside {library.split('/')[0]}/ (a library): tfperf rewrites only files in "
            f"{self.root.name}/; "
            + (
                f"tuned through your options' defaults instead ({_options_text(traced)})"
                if traced
                else "make the DataLoader in your own file, or pass its values from your "
                "argparse options' defaults (`num_workers=args.workers`), to tune it"
            )
        )
        self._untunable[(where, reached)] = Untunable(f"{CALL}(...)", where, reached, reason)

    def _trace(
        self,
        bound: inspect.BoundArguments,
        reached: types.FrameType,
        own: inspect.Signature | None = None,
    ) -> list[tuple[Place, str]]:
        """Records and overrides the call's arguments that come from the user's options'
        defaults; their (option place, argument). `own`: the call is the user's own
        `DataLoader(...)` (its signature), traced by what is written for each argument
        (`_arguments.trace_own`); else a library's, reached from `reached`
        (`_arguments.trace`)."""
        traced: list[tuple[Place, str]] = []
        overridden = False
        for argument, kind, _ in ARGUMENTS:
            if argument not in bound.arguments:
                continue
            value = bound.arguments[argument]
            option = (
                trace(self.options, reached, argument, value)
                if own is None
                else trace_own(
                    self.options, reached, argument, list(own.parameters).index(argument) - 1, value
                )
            )
            if option is None or not _settable(option, argument, value):
                continue
            plain, problem = _plain(value, argument, kind)
            if problem is not None:
                continue
            shown = None if option.form is ArgumentForm.ABSENT else plain
            self._note(option.place, argument, option.form, None, shown, None)
            overridden |= self._apply(option.place, argument, kind, bound)
            traced.append((option.place, argument))
        if overridden:
            _keep_consistent(bound)
        return traced


@contextlib.contextmanager
def recording(
    root: Path, overrides: Mapping[str, int | None] | None = None
) -> Iterator[LoaderRecorder]:
    """Records (and overrides) the `DataLoader(...)` calls made from files under `root`."""
    from torch.utils.data import DataLoader

    recorder = LoaderRecorder(root, overrides or {})
    original = DataLoader.__init__
    signature = inspect.signature(original)

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        args, kwargs = recorder.on_init(self, signature, args, kwargs, sys._getframe(1))
        original(self, *args, **kwargs)

    DataLoader.__init__ = init  # type: ignore[method-assign]
    try:
        with recording_options(recorder.options):
            yield recorder
    finally:
        DataLoader.__init__ = original  # type: ignore[method-assign]


class TorchSites:
    """The `DataLoader` calls of a training script: found by recording, patched by AST."""

    def find(self, pipeline: Any, *, measure_stages: bool = False) -> Discovery:
        """Runs the script (`pipeline.path`, `pipeline.argv`) up to its loop's first batch.

        `measure_stages` is accepted for the interface: a `DataLoader` has no stages.
        """
        from tfperf.frameworks.torch._script import run_script
        from tfperf.frameworks.torch._script_iter import ScriptMode

        argv = tuple(getattr(pipeline, "argv", ()))
        run = run_script(pipeline.path, argv, {}, steps=0, mode=ScriptMode.DISCOVER)
        return run.discovery

    def patch(
        self,
        root: Path,
        discovery: Discovery,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        *,
        script: bool,
    ) -> Patch:
        """The patch of the files under `root` that runs `after` (knobs as `Knobs.to_dict`
        writes them) instead of `before`: the sites' values, and `torch.set_num_threads`."""
        chosen = _as_run(discovery.sites, dict(after.get("sites") or {}))
        changes = changes_between(discovery.sites, chosen)
        threads = after.get(THREADS_KNOB)
        anchor = Anchor.parse(discovery.end, True) if discovery.end else None
        statements: tuple[str, ...] = ()
        if threads is not None and threads != before.get(THREADS_KNOB) and anchor is not None:
            statements = _threads_statements(root / anchor.file, int(threads))
        return make_patch(root, changes, anchor, Additions(statements=statements))

    def unplaceable(self, root: Path, discovery: Discovery) -> dict[str, str]:
        """Knob name -> why no patch of a script could write it, so a study fixes it.

        A script's `DataLoader` takes its values at its call, where they are tuned as sites
        (`DataLoader@train.py:40.num_workers`); the framework's loader knobs act only on a
        loader a pipeline file's `make_loader` builds. `torch_threads` is written as
        `torch.set_num_threads(n)` after the file's top imports: unplaceable without them.
        """
        reason = (
            "a script's DataLoader takes its values at its call, tuned there as "
            f"{CALL}@FILE:LINE sites"
        )
        problems = dict.fromkeys(LOADER_KNOBS, reason)
        problems["mixed_precision"] = (
            "autocast wraps a pipeline file's train step; a script's own loop has none to wrap"
        )
        if discovery.end is None:
            problems[THREADS_KNOB] = "tfperf found no DataLoader of yours that the loop iterates"
            return problems
        anchor = Anchor.parse(discovery.end, True)
        try:
            source = (root / anchor.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            problems[THREADS_KNOB] = f"tfperf cannot read {anchor.file} ({error})"
            return problems
        problem = placement_problem(source, anchor, "statements")
        if problem is not None:
            problems[THREADS_KNOB] = problem
        return problems


def _threads_statements(file: Path, threads: int) -> tuple[str, ...]:
    """`torch.set_num_threads(n)`, spelled with the file's own `import torch` (added if none)."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return (f"torch.set_num_threads({threads})",)  # make_patch reports the file unreadable
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch":
                    return (f"{alias.asname or 'torch'}.set_num_threads({threads})",)
    return ("import torch", f"torch.set_num_threads({threads})")


def _as_run(sites: tuple[CallSite, ...], chosen: dict[str, Any]) -> dict[str, Any]:
    """`chosen` as its loaders ran (`as_run`): where a call is left with no workers, the
    arguments that need them stay as written, so no patch writes a `prefetch_factor` that
    torch refuses without workers (a study stored before trials were recorded as run)."""
    written = Knobs(sites=SiteValues({site.name: site.value for site in sites}))
    return dict(as_run(Knobs(sites=SiteValues(chosen)), written).sites)


def _keep_consistent(bound: inspect.BoundArguments) -> None:
    """With no workers, the arguments that need them go back to their defaults."""
    if not bound.arguments.get("num_workers"):
        for argument in WORKER_ONLY & set(bound.arguments):
            bound.arguments[argument] = _DEFAULTS[argument]


def _plain(value: Any, argument: str, kind: SiteKind) -> tuple[int | None, str | None]:
    """An argument's value as a site holds it (a switch as 0 or 1), or why it cannot be."""
    if kind is SiteKind.FLAG:
        if isinstance(value, bool):
            return int(value), None
        return None, f"its {argument} is a {type(value).__name__}, not True or False"
    if value is None and kind is SiteKind.FACTOR:
        return None, None
    if isinstance(value, int) and not isinstance(value, bool):
        return value, None
    return None, f"its {argument} is {value!r}, not an integer tfperf can tune"


def _varies(values: list[int | None]) -> str | None:
    if len(values) < 2:
        return None
    shown = ", ".join("None" if v is None else str(v) for v in values)
    return f"it runs more than once with different values ({shown})"


def _site(seen: _Seen) -> CallSite:
    place = seen.place
    name = place.name(CALL, seen.argument)
    return seen.site(name, place.call, place.written or seen.argument, seen.calls)


def _call_text(seen: _Seen) -> str:
    return f"{CALL}({seen.argument}=...)"


def _library_path(frame: types.FrameType) -> str:
    """A library file from its package on: `lightning/pytorch/trainer/trainer.py`, from its
    installed folder, else from its module's name (a package on `PYTHONPATH`)."""
    filename = frame.f_code.co_filename
    parts = Path(os.path.realpath(filename)).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) + 1 :])
    module = frame.f_globals.get("__name__")
    if not isinstance(module, str) or module == "__main__":
        return Path(filename).name
    dotted = module.split(".")
    if Path(filename).name == "__init__.py":
        return "/".join([*dotted, "__init__.py"])
    return "/".join([*dotted[:-1], Path(filename).name])


def _settable(option: Option, argument: str, value: Any) -> bool:
    """Whether the option's default can stand for the value: an option that writes no
    `default=` is rewritten by adding one, which "not set" (None) must leave as it ran, so
    its default must be the DataLoader's own."""
    default = _DEFAULTS.get(argument)
    return option.form is ArgumentForm.KEYWORD or (
        type(default) is type(value) and default == value
    )


def _options_text(traced: list[tuple[Place, str]]) -> str:
    return ", ".join(f"{argument} from {place}" for place, argument in traced)
