"""The answer of a study report: what to use, how sure, what it leaves, and the whole change.

Data only (frozen records of plain values, tested by equality); `_study_charts` draws, the
template shows, and `_study_headline` words the page's first lines. Every figure of a
configuration comes from `trial_figures`, so the summary, the trial table and the charts show
the same number for it: the re-measured median where there is one, else the single run,
labelled as such.
"""

from __future__ import annotations

import dataclasses

from tfperf import frameworks
from tfperf.frameworks import Framework, Words
from tfperf.knobs import KNOBS, Knobs
from tfperf.knobs.declare import Applier, turned_on_checks
from tfperf.report._snippets import baseline_snippet, code_snippet
from tfperf.report._study_data import StudySnapshot, TrialRow, choose, flat_knobs
from tfperf.report._tune_text import training_warnings
from tfperf.report._words import knob_value
from tfperf.results.findings import introduced_hazards
from tfperf.results.tune import (
    EditGain,
    InputOnlyChoice,
    Measurement,
    Speedup,
    TuneResult,
    configuration_name,
    keeps_baseline,
    recommend,
    speedup,
    training_changes,
)
from tfperf.sites import Patch, changes_between, make_patch

_LABELS = {"baseline": "your baseline", "autotune": "everything AUTOTUNE"}


@dataclasses.dataclass(frozen=True)
class TrialFigure:
    """The one examples/s (and RAM) figure a configuration shows everywhere in the report."""

    examples_per_sec: float
    low: float  # the slowest and fastest run; equal for a single run
    high: float
    runs: int
    peak_rss_bytes: int | None
    remeasured: bool

    @property
    def spread(self) -> float:
        """Half the range over the median, as `Measurement.spread`."""
        if self.examples_per_sec <= 0:
            return 0.0
        return (self.high - self.low) / 2 / self.examples_per_sec


def trial_figures(snapshot: StudySnapshot) -> dict[int, TrialFigure]:
    """By trial number: the re-measured median for finalists, the single run for the others."""
    figures: dict[int, TrialFigure] = {}
    for row in snapshot.trials:
        if row.state == "COMPLETE" and row.examples_per_sec is not None:
            value = row.examples_per_sec
            figures[row.number] = TrialFigure(value, value, value, 1, row.peak_rss_bytes, False)
    for m in snapshot.measurements:
        if m.trial_number is not None and m.examples_per_sec:
            figures[m.trial_number] = _measured(m)
    return figures


def _measured(m: Measurement) -> TrialFigure:
    runs = m.windows
    return TrialFigure(m.median, min(runs), max(runs), len(runs), m.peak_rss_bytes, len(runs) > 1)


@dataclasses.dataclass(frozen=True)
class SummaryRow:
    """One configuration in the summary card."""

    label: str
    role: str  # "best", "baseline", "autotune", "fastest" or "finalist": how the row is styled
    trial: int | None
    median: float
    spread: float
    runs: int
    peak_rss_bytes: int
    confirmed: bool = False  # the runs were made after the choice (`Measurement.confirmed`)


@dataclasses.dataclass(frozen=True)
class KnobChange:
    name: str
    baseline: str
    best: str
    changes_training: bool


@dataclasses.dataclass(frozen=True)
class Banner:
    """The recommendation's banner: green only for a measured gain that keeps training as is."""

    level: str  # "ok" or "warn"
    text: str


@dataclasses.dataclass(frozen=True)
class PatchBlock:
    """The whole change for code tuned at its call sites: the diff and every edit by hand."""

    root: str
    diff: str
    manual_edits: tuple[str, ...]
    verified: str | None  # "patched/original 1.58x ± 0.04", when the tuner verified it
    problem: str | None  # why there is no diff or no verification
    # The structure edits searched, whether the patch makes each, and what each was worth.
    edits: tuple[EditGain, ...] = ()


@dataclasses.dataclass(frozen=True)
class Summary:
    """The answer of a study: what to use, how much faster, how sure, and what to check."""

    rows: tuple[SummaryRow, ...]
    vs_baseline: Speedup | None
    vs_autotune: Speedup | None
    recommendation: str
    banner: Banner
    changes: tuple[KnobChange, ...]
    warnings: tuple[str, ...]
    tf_data_code: str  # empty for code tuned at its call sites: it gets a patch instead
    baseline_code: str
    remeasured: bool
    # The tuned pipeline's framework in words: its calls ("tf.data" or "DataLoader"), ...
    words: Words
    patch: PatchBlock | None = None
    # The recommendation is the baseline: no snippet, no patch, no changes to show.
    keeps_baseline: bool = False
    # The framework's own rule of thumb (PyTorch's `num_workers` = cores), where it was measured.
    vs_rule: Speedup | None = None


def measured_configurations(snapshot: StudySnapshot) -> list[Measurement]:
    """The re-measured configurations, or before re-measurement the single runs to compare."""
    return list(snapshot.measurements) or _single_runs(snapshot)


def summary(snapshot: StudySnapshot, tune: TuneResult | None = None) -> Summary | None:
    """The summary card, or None when no configuration has completed yet."""
    measured = measured_configurations(snapshot)
    choice = choose(measured)
    if choice is None:
        return None
    best = choice.best
    by_label = {m.label: m for m in measured}
    baseline, autotune = by_label.get("baseline"), by_label.get("autotune")
    vs_baseline = speedup(best, baseline) if baseline else None
    # Keeping the baseline hands nothing over, whichever configuration ran fastest.
    keep = vs_baseline is not None and keeps_baseline(best, vs_baseline)
    changes = training_changes(best, baseline) if baseline and not keep else []
    # A pipeline that reads its knobs (no discovery): code that reads none gets a patch.
    snippets = not keep and snapshot.discovery is None and not best.knobs.sites
    framework = _framework(snapshot, tune)
    knobs = best.knobs.to_dict()
    rule = by_label.get("rule")
    return Summary(
        rows=_rows(measured, choice),
        vs_baseline=vs_baseline,
        vs_autotune=speedup(best, autotune) if autotune and autotune is not best else None,
        recommendation=_recommendation(best, vs_baseline, changes, snapshot.remeasured),
        banner=banner(choice, vs_baseline, changes, snapshot.remeasured),
        changes=() if keep else _changes(best, baseline, changes),
        warnings=(*_warnings(best, baseline, changes, keep), *_hazards(snapshot, best, keep)),
        tf_data_code=code_snippet(knobs, framework.name) if snippets else "",
        baseline_code=baseline_snippet(knobs, framework.name) if snippets else "",
        remeasured=snapshot.remeasured,
        words=framework.words,
        patch=None if keep else patch_block(snapshot, best, baseline, tune),
        keeps_baseline=keep,
        vs_rule=speedup(best, rule) if rule and rule is not best else None,
    )


def _warnings(
    best: Measurement, baseline: Measurement | None, changes: list[str], keep: bool
) -> tuple[str, ...]:
    """What to check before adopting `best`: its changes to training, then what the knobs
    it turns on declare (`turned_on_checks`), as the terminal summary says them."""
    if baseline is None:
        return ()
    checks = [] if keep else turned_on_checks(baseline.knobs, best.knobs)
    return (*training_warnings(best, baseline, changes), *checks)


def _hazards(snapshot: StudySnapshot, best: Measurement, keep: bool) -> list[str]:
    """What adopting `best` changes in the data training sees, from its trial's stored
    findings against the baseline's, as the terminal summary says it (`TuneResult.hazards`)."""
    after, before = snapshot.best_result, snapshot.baseline_result
    if keep or after is None or best.trial_number != snapshot.best_trial:
        return []
    return introduced_hazards(after.findings, before.findings if before is not None else [])


def _framework(snapshot: StudySnapshot, tune: TuneResult | None) -> Framework:
    """The tuned pipeline's framework: the tune's own name, else what its stored profiles say."""
    if tune is not None:
        return frameworks.get(tune.framework)
    return frameworks.detect_result((snapshot.best_result, snapshot.baseline_result))


def _rows(measured: list[Measurement], choice: InputOnlyChoice) -> tuple[SummaryRow, ...]:
    """The recommendation, the faster one passed over, both references, then other finalists."""
    order = {"baseline": 2, "autotune": 3}
    picked: list[tuple[Measurement, str]] = [(choice.best, "best")]
    if choice.fastest is not None:
        picked.append((choice.fastest, "fastest"))
    rest = sorted(
        (m for m in measured if all(m is not p for p, _ in picked)),
        key=lambda m: (order.get(m.label, 4), -m.median),
    )
    picked += [(m, m.label if m.label in order else "finalist") for m in rest]
    return tuple(_summary_row(m, role) for m, role in picked)


def _summary_row(measurement: Measurement, role: str) -> SummaryRow:
    label = _LABELS.get(measurement.label, measurement.label)
    if role == "best" and measurement.label not in _LABELS:
        label = f"best: {measurement.label}"
    elif role == "fastest":
        label = f"fastest in the search, changes training: {label}"
    elif role == "finalist":
        label = f"also re-measured: {label}"
    if measurement.over_budget:
        repeats = "repeat" if measurement.over_budget == 1 else "repeats"
        label += f" (over the memory budget in {measurement.over_budget} {repeats})"
    return SummaryRow(
        label=label,
        role=role,
        trial=measurement.trial_number,
        median=measurement.median,
        spread=measurement.spread,
        runs=len(measurement.windows),
        peak_rss_bytes=measurement.peak_rss_bytes,
        confirmed=bool(measurement.confirmed),
    )


def banner(
    choice: InputOnlyChoice, vs_baseline: Speedup | None, changes: list[str], remeasured: bool
) -> Banner:
    """Green for a re-measured gain that leaves training as written; amber otherwise."""
    best, fastest = choice.best, choice.fastest
    if vs_baseline is None:
        return Banner("warn", "The baseline has not completed: there is nothing to compare with.")
    if fastest is not None and choice.gain is not None and not keeps_baseline(best, vs_baseline):
        return Banner("warn", _passed_over(choice, fastest, vs_baseline, changes))
    green = remeasured and vs_baseline.significant and not changes
    return Banner("ok" if green else "warn", recommend(best, vs_baseline, changes))


def _passed_over(
    choice: InputOnlyChoice, fastest: Measurement, vs_baseline: Speedup, changes: list[str]
) -> str:
    """Why the fastest configuration is not the one to use."""
    best = choice.best
    if not changes:
        return (
            f"Use {configuration_name(best)}: {vs_baseline.ratio:.2f}x, training unchanged. "
            f"The fastest, {configuration_name(fastest)}, changes training for a gain within noise "
            f"({choice.gain.describe() if choice.gain else 'n/a'})."
        )
    over = choice.passed_over
    return (
        f"{recommend(best, vs_baseline, changes)} The fastest, {configuration_name(fastest)}, "
        "changes training more for a figure within noise of it "
        f"({over.describe() if over else 'n/a'})."
    )


def _single_runs(snapshot: StudySnapshot) -> list[Measurement]:
    """Before re-measurement: the references and the best trial, one run each."""
    rows = [row for row in snapshot.trials if row.feasible and row.examples_per_sec]
    picks: dict[str, TrialRow] = {}
    for row in rows:
        if row.reference and row.reference not in picks:
            picks[row.reference] = row
    if rows:
        top = max(rows, key=lambda row: row.examples_per_sec or 0.0)
        if top.reference is None:
            picks[f"trial {top.number}"] = top
    return [
        Measurement(
            label=label,
            trial_number=row.number,
            knobs=Knobs.from_mapping(row.knobs),
            examples_per_sec=[row.examples_per_sec or 0.0],
            peak_rss_bytes=row.peak_rss_bytes or 0,
            peak_gpu_bytes=row.peak_gpu_bytes,
        )
        for label, row in picks.items()
    ]


def _recommendation(
    best: Measurement, vs_baseline: Speedup | None, changes: list[str], remeasured: bool
) -> str:
    if vs_baseline is None:
        return (
            f"{best.label} is the fastest configuration measured, but the baseline has not "
            "completed, so there is nothing to compare it with yet."
        )
    text = recommend(best, vs_baseline, changes)
    if not remeasured:
        text += (
            " These are single runs, not yet re-measured side by side: finish the study "
            "(run the same `tfperf tune` command again) before trusting the ratio."
        )
    return text


def _changes(
    best: Measurement, baseline: Measurement | None, training: list[str]
) -> tuple[KnobChange, ...]:
    if baseline is None:
        return ()
    before, after = flat_knobs(baseline.knobs), flat_knobs(best.knobs)
    names = [*Knobs.names(), *sorted(set(after) - set(Knobs.names()))]
    return tuple(
        KnobChange(name, knob_value(old, name), knob_value(new, name), name in training)
        for name in names
        if (old := before.get(name)) != (new := after.get(name))
    )


def patch_block(
    snapshot: StudySnapshot,
    best: Measurement,
    baseline: Measurement | None,
    tune: TuneResult | None,
) -> PatchBlock | None:
    """The tuner's hand-over when it wrote one, else the diff and edits built from the study."""
    if tune is not None and tune.handover is not None:
        handover = tune.handover
        verified = handover.verified
        return PatchBlock(
            root=handover.root,
            diff=handover.diff,
            manual_edits=tuple(handover.manual_edits),
            verified=None if verified is None else f"patched/original {verified.describe()}",
            problem=handover.verify_problem,
            edits=tuple(handover.edits),
        )
    chosen = dict(best.knobs.sites)
    if not chosen or snapshot.discovery is None or snapshot.code_root is None:
        return None
    root = str(snapshot.code_root)
    applied = tuple(applied_edits(best, baseline)) if baseline is not None else ()
    changes = changes_between(snapshot.discovery.sites, chosen)
    try:
        patch = make_patch(snapshot.code_root, changes) if changes else None
    except OSError as error:
        problem = f"the pipeline's files cannot be read here ({error})"
        return PatchBlock(root, "", applied, None, problem)
    return _from_patch(root, patch, applied)


def _from_patch(root: str, patch: Patch | None, applied: tuple[str, ...]) -> PatchBlock | None:
    manual = tuple(edit.describe() for edit in patch.manual) if patch is not None else ()
    if patch is None and not applied:
        return None
    diff = patch.diff if patch is not None else ""
    return PatchBlock(root, diff, (*manual, *applied), None, None)


def applied_edits(best: Measurement, baseline: Measurement) -> list[str]:
    """Settings tfperf applied itself to a plain file or script: code to add by hand.

    No call in the user's file holds the precision or the tf.data options, so the diff cannot
    carry them; without these lines the patched code runs a configuration never measured.
    """
    # Plain values (the precision as its string), as the edits and option lines write them.
    before, after = baseline.knobs.to_dict(), best.knobs.to_dict()
    changed = [
        knob
        for knob in KNOBS.applied_by(Applier.PRECISION, Applier.TF_DATA, Applier.PROCESS)
        if (value := after.get(knob.name)) is not None and value != before.get(knob.name)
    ]
    options = [
        knob.option_snippet(after[knob.name])
        for knob in changed
        if knob.applied_by is Applier.TF_DATA
    ]
    edits = []
    for knob in changed:
        if knob.edit is not None:
            edits.append(knob.edit.format(value=after[knob.name]))
        elif knob.applied_by is Applier.TF_DATA and options:
            # Every option goes on one tf.data.Options, where the first one changed sits.
            edits.append(
                "Add to the dataset given to fit or your own loop: options = tf.data.Options(); "
                + "; ".join(options)
                + "; ds = ds.with_options(options)."
            )
            options = []
    return edits
