"""Under which conditions a recorded run was timed: what makes two timings comparable.

A time per step means little without the machine and its load: the same preset on the same
kind of CPU ran 7x slower when the machine was shared with other jobs. Each record written
by :mod:`course_utils.measure.record` therefore stores ``conditions``:

- ``cpu_model`` (``/proc/cpuinfo``'s model name), ``cpu_count`` (``os.cpu_count()``) and
  ``usable_cpus`` (the CPUs this process may run on, ``os.sched_getaffinity``);
- ``threads``: ``torch.get_num_threads()`` during the run;
- ``load_start``, ``load_mean``, ``load_max``: the 1-minute load average (``os.getloadavg``:
  runnable processes, this run's own threads included) before training, and its mean and
  maximum over the samples taken at each evaluation and at the end;
- ``rehearsal``: the ``COURSE_REHEARSE`` mode of a rehearsed run, or ``None``;
- ``platform``: ``platform.platform()``.

Records written before these fields existed read them as ``"unknown"`` (:func:`conditions_of`).
:func:`explain_timing_gap` turns two sets of conditions into the sentence notebook 12 prints.
"""

from __future__ import annotations

import os
import platform

import torch

from course_utils.lab.language import N_, tr, translated

UNKNOWN = "unknown"
CONDITION_KEYS = (
    "cpu_model",
    "cpu_count",
    "usable_cpus",
    "threads",
    "load_start",
    "load_mean",
    "load_max",
    "rehearsal",
    "platform",
)
#: Live tokens/s within this factor of the record's count as "the same speed".
SAME_SPEED = 1.25


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or UNKNOWN


def _load() -> float | str:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # Windows has no load average
        return UNKNOWN


def _usable_cpus() -> int | str:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or UNKNOWN


class ConditionsProbe:
    """Collects a run's conditions: create it before training, call :meth:`sample` at each
    evaluation, :meth:`finish` at the end (it samples once more)."""

    def __init__(self) -> None:
        from course_utils.lab.rehearsal import rehearsal_mode

        self.conditions = {
            "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count() or UNKNOWN,
            "usable_cpus": _usable_cpus(),
            "threads": torch.get_num_threads(),
            "load_start": _load(),
            "rehearsal": rehearsal_mode(),
            "platform": platform.platform(),
        }
        self.loads: list[float] = []

    def sample(self) -> None:
        """Read the 1-minute load average now."""
        load = _load()
        if load != UNKNOWN:
            self.loads.append(load)

    def finish(self) -> dict:
        """The conditions, every key of :data:`CONDITION_KEYS` present."""
        self.sample()
        mean = round(sum(self.loads) / len(self.loads), 2) if self.loads else UNKNOWN
        peak = max(self.loads) if self.loads else UNKNOWN
        return {**self.conditions, "load_mean": mean, "load_max": peak}


def conditions_of(record: dict) -> dict:
    """A record's conditions with every key of :data:`CONDITION_KEYS`; a key the record
    lacks (one written before the fields existed) reads ``"unknown"``."""
    stored = record.get("conditions") or {}
    return {key: stored.get(key, UNKNOWN) for key in CONDITION_KEYS}


def live_conditions() -> dict:
    """This machine's conditions now (load: the current 1-minute average)."""
    probe = ConditionsProbe()
    return probe.finish()


def _busy(conditions: dict) -> bool | None:
    """True when more processes wanted a CPU than there were usable CPUs (the run's steps
    then waited for a core); None when unknown."""
    load, cpus = conditions["load_max"], conditions["usable_cpus"]
    if UNKNOWN in (load, cpus):
        return None
    return load > cpus


def _shown(value) -> str:
    """A condition as the learner reads it: ``"unknown"`` in the current language."""
    return tr("unknown") if value == UNKNOWN else str(value)


def _describe(conditions: dict, tokens_per_s: float) -> str:
    load = conditions["load_mean"]
    return tr(
        "{tokens_per_s:,.0f} tokens/s with {threads} thread(s) on {cpu_model} "
        "({usable_cpus} usable CPUs, 1-minute load average {load})"
    ).format(
        tokens_per_s=tokens_per_s,
        threads=_shown(conditions["threads"]),
        cpu_model=_shown(conditions["cpu_model"]),
        usable_cpus=_shown(conditions["usable_cpus"]),
        load=_shown(load) if load == UNKNOWN else f"{load:.1f}",
    )


#: Why two runs' speeds differ, when a recorded condition differs (shown translated).
_DIFFERENT = (
    ("cpu_model", N_("they ran on different CPUs")),
    ("threads", N_("they used different thread counts")),
)


def explain_timing_gap(
    record_conditions: dict, record_tokens_per_s: float, live: dict, live_tokens_per_s: float
) -> str:
    """The sentences that compare a record's speed with a live run's, from their conditions.

    Args:
        record_conditions: :func:`conditions_of` a record.
        record_tokens_per_s: the record's ``timing["tokens_per_s"]``.
        live: :func:`live_conditions` (or a probe's :meth:`~ConditionsProbe.finish`).
        live_tokens_per_s: the live run's tokens per second.

    Returns:
        Two or three sentences, in the language ``course_utils`` speaks
        (:mod:`course_utils.lab.language`): both speeds and conditions, their ratio, and which
        recorded condition explains a gap (or that none does, or that the record does not say).
    """
    ratio = live_tokens_per_s / record_tokens_per_s
    text = tr(
        "The record trained at {record}; this run at {live}: {ratio:.2f}x the record's speed."
    ).format(
        record=_describe(record_conditions, record_tokens_per_s),
        live=_describe(live, live_tokens_per_s),
        ratio=ratio,
    )
    if 1 / SAME_SPEED <= ratio <= SAME_SPEED:
        return text + tr(" Within {factor}x of each other: no gap to explain.").format(
            factor=SAME_SPEED
        )
    reasons = _reasons(record_conditions, live, ratio)
    if reasons:
        return text + tr(" The recorded conditions explain it: {reasons}.").format(
            reasons=tr("; ").join(reasons)
        )
    if UNKNOWN in (record_conditions["load_max"], record_conditions["threads"]):
        return text + tr(
            " The record does not say under which load it ran (it predates the conditions "
            "fields), so nothing here explains the gap; `make rerecord` on an idle machine "
            "writes a record that does."
        )
    return text + tr(
        " Nothing in the recorded conditions explains it (same CPU model and threads, no "
        "oversubscription): look for what they do not capture (turbo clocks, memory "
        "bandwidth, load between two samples)."
    )


def _reasons(record_conditions: dict, live: dict, ratio: float) -> list[str]:
    """The recorded conditions that explain a speed ``ratio`` (live / record), as clauses in
    the current language: a different CPU or thread count, a slower run's busy machine."""
    reasons = []
    for key, reason in _DIFFERENT:
        known = UNKNOWN not in (record_conditions[key], live[key])
        if known and record_conditions[key] != live[key]:
            reasons.append(translated(reason))
    busy = (
        (
            tr(
                "the record's machine was oversubscribed (load up to {load:.1f} on {cpus} "
                "usable CPUs), so its steps waited for a core"
            ),
            record_conditions,
            ratio > 1,
        ),
        (
            tr(
                "this run's machine was oversubscribed (load up to {load:.1f} on {cpus} "
                "usable CPUs), so its steps waited for a core"
            ),
            live,
            ratio < 1,
        ),
    )
    for reason, conditions, slower in busy:
        if slower and _busy(conditions):
            reasons.append(
                reason.format(load=conditions["load_max"], cpus=conditions["usable_cpus"])
            )
    return reasons
