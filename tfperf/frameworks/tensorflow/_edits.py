"""Structure edits the recorder applies during a trial: `cache()`, and two calls swapped.

Besides values, tfperf may change the structure of a pipeline at a `map` call of the user's
(one whose columns are known). Each edit is a site of kind `SiteKind.EDIT`, named on the map's
line, written value 0 (as written), searched as 0 or 1:

- `cache@FILE:LINE.added`: `.cache()` appended to the map, when every stage up to it is
  deterministic (no shuffle, no random op), its cardinality is finite and known, and the
  cached elements fit the RAM budget (`_edit_checks.cache_problem`);
- `shuffle@FILE:LINE.before_map`: the `shuffle` that reads the map's output moved before the
  map, when the map enlarges its elements (a decode): the shuffle buffer then holds the small
  elements, its RAM falling by the decode ratio;
- `map@FILE:LINE.after_batch`: the map moved after the `batch` that reads its output, when its
  function traces on the batched element spec to the batched result (cedar's reordering). It
  can change what the function computes (a per-image mean becomes a per-batch one), so
  `tfperf tune` searches it only with `--reorder`.

During a build, every map, shuffle and batch call of the user's is remembered with its
arguments (after the overrides) and the original tf.data method; an override of 1 then
appends the cache to the map's result, or, at the shuffle or batch, rebuilds the two calls in
the other order from the map's input. A cache wins over a swap at the same map: the shuffle
or batch then reads the cache, and is left where it is (the patch does the same).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from tfperf.frameworks import Place, site_at
from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._edit_checks import batched_problem, cache_problem, decode_problem
from tfperf.frameworks.tensorflow._seen import Run
from tfperf.results.discovery import CallSite

logger = logging.getLogger(__name__)

#: The edit each consumer of a map makes: its site's (method, argument).
EDIT_ARGUMENTS = {"shuffle": ("shuffle", "before_map"), "batch": ("map", "after_batch")}
CACHE = ("cache", "added")
_REMEMBERED = frozenset({"map", "shuffle", "batch"})


@dataclasses.dataclass(eq=False)
class UserCall:
    """One run of a map, shuffle or batch of the user's, enough to make it again elsewhere."""

    place: Place
    method: str
    original: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    run: Run
    result: Any = None
    cached: bool = False  # this is the map's output with the cache edit appended

    def again(self, dataset: Any) -> Any:
        """The same call (same arguments, same original method) on another input."""
        return self.original(dataset, *self.args[1:], **self.kwargs)


class EditRecorder:
    """The structure edits of one build: remembered calls, the overrides applied, the sites."""

    def __init__(self, overrides: Mapping[str, int | None], used: set[str]) -> None:
        self.overrides = overrides
        self.used = used
        self.places: dict[int, Place] = {}  # id of a run -> where its call is
        self.maps: dict[int, UserCall] = {}  # id of a map's output (or its cache) -> the map
        self.consumers: list[tuple[UserCall, UserCall]] = []  # (map, shuffle or batch)
        self.sites: list[CallSite] = []
        self.refused: dict[str, str] = {}  # edit site name -> why it is not proposed

    def saw(self, run: Run, place: Place, method: str) -> None:
        """Remembers where the call of `run` is, when it is one an edit can involve."""
        if method in _REMEMBERED and place.col is not None and place.end_col is not None:
            self.places[id(run)] = place

    def call(
        self,
        method: str,
        run: Run,
        original: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Runs the call of `run` (`original(*args, **kwargs)`), with the edits overridden."""
        place = self.places.get(id(run))
        if place is None:
            return original(*args, **kwargs)
        call = UserCall(place, method, original, args, kwargs, run)
        below = self.maps.get(id(args[0])) if args else None
        if method in EDIT_ARGUMENTS and below is not None:
            self.consumers.append((below, call))
            swapped = self._swap(below, call)
            if swapped is not None:
                call.result = swapped
                return swapped
        call.result = original(*args, **kwargs)
        if method != "map":
            return call.result
        self.maps[id(call.result)] = call
        name = place.name(*CACHE)
        if self._wanted(name):
            run.results.append(call.result)
            cached = call.result.cache()
            self.maps[id(cached)] = dataclasses.replace(call, result=cached, cached=True)
            return cached
        return call.result

    def _swap(self, below: UserCall, call: UserCall) -> Any | None:
        name = below.place.name(*EDIT_ARGUMENTS[call.method])
        if not self._wanted(name) or below.cached:
            return None  # a cache at the map wins: the call reads the cache, as written
        moved = call.again(below.args[0])
        below.run.results.append(moved)
        return below.again(moved)

    def _wanted(self, name: str) -> bool:
        if name not in self.overrides:
            return False
        self.used.add(name)
        return self.overrides[name] == 1

    def finish(self, dataset: Any) -> None:
        """Decides the edit sites of this build: each candidate the checks accept, and each
        edit the overrides name (a trial measures it: it was accepted before the study)."""
        chain = {id(each) for each in _tf.walk_inputs(dataset)}
        maps = [c for c in {id(c): c for c in self.maps.values()}.values() if not c.cached]
        measured = [c for c in maps if id(c.result) in chain or c.run.feeds(chain)]
        # The last map first: a cache goes after the last one that passes the checks.
        measured.sort(key=lambda c: -sum(1 for _ in _tf.walk_inputs(c.result)))
        # A pipeline that caches already gets no other cache (its own may sit after the map).
        cached = any(_tf.method_of(each).name == "cache" for each in _tf.walk_inputs(dataset))
        for call in measured:
            name = call.place.name(*CACHE)
            if name in self.overrides:
                self._decide(name, call.place, None)
            elif cached:
                self.refused[name] = "the pipeline caches after it already, or a later map"
            else:
                cached = self._decide(name, call.place, cache_problem(call.result))
        for below, consumer in self.consumers:
            name = below.place.name(*EDIT_ARGUMENTS[consumer.method])
            if not (consumer.run.feeds(chain) or id(consumer.result) in chain):
                continue
            if below.cached and name not in self.overrides:
                continue
            check = decode_problem if consumer.method == "shuffle" else batched_problem
            problem = None if name in self.overrides else check(below, consumer)
            self._decide(name, below.place, problem)

    def _decide(self, name: str, place: Place, problem: str | None) -> bool:
        if problem is not None:
            self.refused[name] = problem
            logger.debug("structure edit %s not proposed: %s", name, problem)
            return False
        if name not in {site.name for site in self.sites}:
            self.sites.append(edit_site(name, place))
        return True


def edit_site(name: str, place: Place) -> CallSite:
    """The site of a structure edit at the map `place` (no call of its own: `calls` 0)."""
    from tfperf.knobs import SiteName

    parsed = SiteName.parse(name)
    return site_at(place, name, parsed.method, parsed.argument)
