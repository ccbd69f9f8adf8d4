"""A history checker for concurrent appends, in the style of a list-append workload.

Example:
    from tests.reliability.history import Append, Read, check

    verdict = check(appends, reads, final={"c1": observed}, window_limit=None)
    assert verdict.valid, verdict.explain()

Writers tag every message with its writer and counter (the message id carries
the tag) and record when each append was invoked, when it completed and how it
ended: ``ok`` (acknowledged), ``fail`` (definitely not applied) or ``info``
(unknown, e.g. the connection died). Readers record every snapshot they saw.
Times are ``time.monotonic_ns()``, one clock for every thread and process of
the machine.

The checker then proves, per conversation:

- no message is stored twice, and nothing is stored that no writer sent;
- every acknowledged message is in the final state, unless the window evicted
  it (an eviction reported by exactly one append, never seen again after it);
- a failed append is nowhere;
- each batch is all-or-nothing and contiguous (only an evicted head may miss);
- per-writer order and real-time order: if A was acknowledged before B was
  invoked, A comes first (and, with a window, B is never evicted while A stays);
- every read is a contiguous run of the one order all observations agree on
  (a prefix of the final state when nothing is evicted), sees every append
  acknowledged before it began, and never sees a half batch; later reads never
  move the window start back or lose the end;
- with a window: the window (after its system messages) starts on a user
  message and holds at most ``window_limit`` messages;
- with a bounded retention (``retained``): a message may also be missing
  because a trim removed it, but only if no append still stored was
  acknowledged before its own began (a trim removes the oldest numbers only),
  and no observation holds more than ``retained`` messages.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Append", "Observation", "Read", "Verdict", "check"]

Outcome = Literal["ok", "fail", "info"]


@dataclass(frozen=True)
class Append:
    """One append as the writer saw it.

    Attributes:
        conversation: The conversation it wrote to.
        writer: Who wrote it (unique per run).
        counter: The writer's own counter, 0, 1, 2, ...
        ids: The message ids of the batch, in order.
        roles: Their roles (``"user"``, ``"assistant"``, ...).
        invoke: ``monotonic_ns`` just before the call.
        complete: ``monotonic_ns`` just after it returned or raised.
        outcome: ``ok``, ``fail`` or ``info``.
        evicted: The ids the append reported as evicted (``ok`` only).
    """

    conversation: str
    writer: str
    counter: int
    ids: tuple[str, ...]
    roles: tuple[str, ...]
    invoke: int
    complete: int
    outcome: Outcome
    evicted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Observation:
    """A snapshot of one conversation: message ids and roles, oldest first."""

    ids: tuple[str, ...]
    roles: tuple[str, ...]


@dataclass(frozen=True)
class Read:
    """One read, made while the writers ran."""

    conversation: str
    invoke: int
    complete: int
    ids: tuple[str, ...]
    roles: tuple[str, ...]


@dataclass
class Verdict:
    """What the checker found.

    Attributes:
        appends: Appends checked.
        acknowledged: Of those, acknowledged (``ok``).
        messages: Messages the acknowledged appends carried.
        reads: Reads checked.
        evicted: Acknowledged messages accounted for as evicted.
        lost: Acknowledged messages neither stored nor evicted.
        duplicated: Messages stored (or seen in one read) more than once.
        anomalies: Every other violation, one line each.
    """

    appends: int = 0
    acknowledged: int = 0
    messages: int = 0
    reads: int = 0
    evicted: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """True when nothing was lost, duplicated or otherwise wrong."""
        return not (self.lost or self.duplicated or self.anomalies)

    def explain(self, limit: int = 20) -> str:
        """A short report for an assertion message."""
        lines = [
            f"{self.appends} appends ({self.acknowledged} ok, {self.messages} "
            f"messages), {self.reads} reads, {self.evicted} evicted, "
            f"{len(self.lost)} lost, {len(self.duplicated)} duplicated, "
            f"{len(self.anomalies)} anomalies"
        ]
        lines += [f"lost: {i}" for i in self.lost[:limit]]
        lines += [f"duplicated: {i}" for i in self.duplicated[:limit]]
        lines += self.anomalies[:limit]
        return "\n".join(lines)


def check(
    appends: Iterable[Append],
    reads: Iterable[Read],
    final: Mapping[str, Observation],
    window_limit: int | None = None,
    retained: int | None = None,
) -> Verdict:
    """Check a history; see the module docstring for what is proved.

    Args:
        appends: Every append of the run, in any order.
        reads: Every read of the run, in any order.
        final: The state of each conversation after every writer stopped.
        window_limit: The message window, or ``None`` when it was large enough
            that nothing may be evicted.
        retained: The most messages a bounded log holds (its bound, slack and
            a batch), or ``None`` when the log keeps everything.
    """
    verdict = Verdict()
    by_conversation: dict[str, list[Append]] = defaultdict(list)
    for append in appends:
        by_conversation[append.conversation].append(append)
    reads_by_conversation: dict[str, list[Read]] = defaultdict(list)
    for read in reads:
        reads_by_conversation[read.conversation].append(read)
    for conversation in sorted(set(by_conversation) | set(final)):
        _check_conversation(
            verdict,
            conversation,
            by_conversation.get(conversation, []),
            reads_by_conversation.get(conversation, []),
            final.get(conversation, Observation((), ())),
            window_limit,
            retained,
        )
    return verdict


def _check_conversation(
    verdict: Verdict,
    conversation: str,
    appends: list[Append],
    reads: list[Read],
    final: Observation,
    window_limit: int | None,
    retained: int | None = None,
) -> None:
    anomalies = verdict.anomalies
    where = f"[{conversation}]"
    owner: dict[str, Append] = {}
    for append in appends:
        for message_id in append.ids:
            if message_id in owner:
                anomalies.append(f"{where} two appends sent the id {message_id}")
            owner[message_id] = append
    verdict.appends += len(appends)
    verdict.reads += len(reads)
    acknowledged = [a for a in appends if a.outcome == "ok"]
    verdict.acknowledged += len(acknowledged)
    verdict.messages += sum(len(a.ids) for a in acknowledged)
    uncertain = any(a.outcome == "info" for a in appends)

    # Duplicates and strangers in the final state.
    counts = Counter(final.ids)
    verdict.duplicated += [f"{where} {i} x{n}" for i, n in counts.items() if n > 1]
    present = set(final.ids)
    for message_id in present - owner.keys():
        anomalies.append(f"{where} final state holds {message_id}, never sent")

    # Evictions: each reported once, never present afterwards.
    evicted_by: dict[str, Append] = {}
    for append in acknowledged:
        for message_id in append.evicted:
            if message_id in evicted_by:
                anomalies.append(f"{where} {message_id} was evicted twice")
            evicted_by[message_id] = append
            if message_id in present:
                anomalies.append(f"{where} {message_id} was evicted but reappeared")
    if window_limit is None and evicted_by:
        anomalies.append(
            f"{where} {len(evicted_by)} messages were evicted from a window "
            "large enough to hold everything"
        )

    # Trimmed: gone from a bounded log, which only removes its oldest numbers,
    # so never an append that began after one still stored was acknowledged.
    trimmable: set[int] = set()
    if retained is not None:
        stored_done = sorted(
            a.complete
            for a in acknowledged
            if "system" not in a.roles and any(i in present for i in a.ids)
        )
        trimmable = {
            id(a) for a in acknowledged if not stored_done or a.invoke < stored_done[0]
        }
        if len(final.ids) > retained:
            anomalies.append(
                f"{where} the bounded log holds {len(final.ids)} messages, more "
                f"than {retained}"
            )

    # Lost, failed and half-applied appends.
    for append in appends:
        kept = [i for i in append.ids if i in present]
        if append.outcome == "fail":
            if kept or any(i in evicted_by for i in append.ids):
                anomalies.append(f"{where} failed append {append.ids[0]} was applied")
            continue
        gone = [i for i in append.ids if i not in present]
        if append.outcome == "ok":
            missing = [
                i for i in gone if i not in evicted_by and id(append) not in trimmable
            ]
            if missing and not uncertain:
                verdict.lost += [f"{where} {i}" for i in missing]
            verdict.evicted += len(gone) - len(missing)
        if kept and gone and append.ids[: len(gone)] != tuple(gone):
            anomalies.append(
                f"{where} batch {append.ids[0]} is partly stored: {kept} of "
                f"{list(append.ids)}"
            )

    position = {message_id: p for p, message_id in enumerate(final.ids)}
    _check_batches_contiguous(where, appends, final.ids, position, anomalies)
    _check_writer_order(where, appends, position, evicted_by, anomalies)
    _check_real_time(where, acknowledged, position, evicted_by, anomalies)
    if window_limit is not None:
        _check_window_shape(
            where, "final state", final.ids, final.roles, window_limit, anomalies
        )
    _check_reads(
        where, reads, owner, final, evicted_by, window_limit, retained, verdict
    )


def _check_batches_contiguous(
    where: str,
    appends: Sequence[Append],
    ids: Sequence[str],
    position: Mapping[str, int],
    anomalies: list[str],
) -> None:
    for append in appends:
        places = [position[i] for i in append.ids if i in position]
        if places and places != list(range(places[0], places[0] + len(places))):
            anomalies.append(
                f"{where} batch {append.ids[0]} is not contiguous: positions {places}"
            )


def _check_writer_order(
    where: str,
    appends: Sequence[Append],
    position: Mapping[str, int],
    evicted_by: Mapping[str, Append],
    anomalies: list[str],
) -> None:
    by_writer: dict[str, list[Append]] = defaultdict(list)
    for append in appends:
        by_writer[append.writer].append(append)
    for writer, mine in by_writer.items():
        mine.sort(key=lambda a: a.counter)
        places = [position[i] for a in mine for i in a.ids if i in position]
        if places != sorted(places):
            anomalies.append(f"{where} writer {writer}'s messages are out of order")
        last_evicted = max(
            (a.counter for a in mine if any(i in evicted_by for i in a.ids)),
            default=-1,
        )
        first_kept = min(
            (a.counter for a in mine if any(i in position for i in a.ids)),
            default=None,
        )
        if first_kept is not None and last_evicted > first_kept:
            anomalies.append(
                f"{where} writer {writer}: append {last_evicted} was evicted while "
                f"the older append {first_kept} stayed"
            )


def _check_real_time(
    where: str,
    acknowledged: Sequence[Append],
    position: Mapping[str, int],
    evicted_by: Mapping[str, Append],
    anomalies: list[str],
) -> None:
    """If A was acknowledged before B was invoked, A comes first."""
    stored = sorted(
        (position[a.ids[-1]], a)
        for a in acknowledged
        if a.ids[-1] in position and "system" not in a.roles
    )
    latest: Append | None = None
    for _, append in stored:
        if latest is not None and append.complete < latest.invoke:
            anomalies.append(
                f"{where} real-time order: {append.ids[0]} was acknowledged before "
                f"{latest.ids[0]} began, yet is stored after it"
            )
        if latest is None or append.invoke > latest.invoke:
            latest = append
    evicted_ops = {
        id(a): a for a in acknowledged if any(i in evicted_by for i in a.ids)
    }
    if evicted_ops and stored:
        newest_evicted = max(evicted_ops.values(), key=lambda a: a.invoke)
        for _, append in stored:
            if append.complete < newest_evicted.invoke:
                anomalies.append(
                    f"{where} real-time order: {newest_evicted.ids[0]} was evicted "
                    f"while the older {append.ids[0]} stayed"
                )
                break


def _check_window_shape(
    where: str,
    what: str,
    ids: Sequence[str],
    roles: Sequence[str],
    window_limit: int,
    anomalies: list[str],
) -> None:
    if len(ids) > window_limit:
        anomalies.append(
            f"{where} {what} holds {len(ids)} messages; the window is {window_limit}"
        )
    others = [r for r in roles if r != "system"]
    if others and others[0] != "user":
        anomalies.append(f"{where} {what} starts on a {others[0]} message, not a user")


def _check_reads(
    where: str,
    reads: Sequence[Read],
    owner: Mapping[str, Append],
    final: Observation,
    evicted_by: Mapping[str, Append],
    window_limit: int | None,
    retained: int | None,
    verdict: Verdict,
) -> None:
    anomalies = verdict.anomalies
    observations = [final.ids, *(r.ids for r in reads)]
    successor, order_ok = _successors(where, observations, anomalies)
    chain, rank = _chains(successor) if order_ok else ({}, {})
    unique = {
        id(a): a
        for a in owner.values()
        if a.outcome == "ok" and "system" not in a.roles
    }
    final_place = {message_id: p for p, message_id in enumerate(final.ids)}
    first_other = next((p for p, role in enumerate(final.roles) if role != "system"), 0)
    # reach[k]: the furthest final position of the first k+1 acknowledged
    # appends, in order of completion.
    done = sorted((a.complete, final_place.get(a.ids[-1], -1)) for a in unique.values())
    completions = [complete for complete, _ in done]
    reach = list(itertools.accumulate((p for _, p in done), max))
    for number, read in enumerate(reads):
        label = f"read {number}"
        seen = Counter(read.ids)
        doubled = [i for i, n in seen.items() if n > 1]
        if doubled:
            verdict.duplicated += [f"{where} {label}: {i}" for i in doubled]
        inside = set(read.ids)
        for message_id in read.ids:
            append = owner.get(message_id)
            if append is None:
                anomalies.append(f"{where} {label} saw {message_id}, never sent")
            elif append.outcome == "fail":
                anomalies.append(f"{where} {label} saw {message_id} of a failed append")
            elif append.invoke > read.complete:
                anomalies.append(f"{where} {label} saw {message_id} before it was sent")
            eviction = evicted_by.get(message_id)
            if eviction is not None and eviction.complete < read.invoke:
                anomalies.append(
                    f"{where} {label} saw {message_id} after its eviction was "
                    "acknowledged"
                )
        # Half batches: a batch seen in part may only miss an evicted head.
        batches = {id(owner[i]): owner[i] for i in read.ids if i in owner}
        for append in batches.values():
            flags = [i in inside for i in append.ids]
            if not flags[-1]:
                anomalies.append(
                    f"{where} {label} saw the batch {append.ids[0]} without its end"
                )
            elif not all(flags):
                head = flags.index(True)
                if not all(flags[head:]) or (window_limit is None and retained is None):
                    anomalies.append(
                        f"{where} {label} saw the batch {append.ids[0]} in part"
                    )
        # Stale reads: every append acknowledged before the read began and
        # still in the final state is in the read, which therefore reaches at
        # least as far into the final state.
        needed = bisect.bisect_left(completions, read.invoke)
        if needed and reach[needed - 1] >= 0:
            last = final_place.get(read.ids[-1], -1) if read.ids else -1
            if last < reach[needed - 1]:
                anomalies.append(
                    f"{where} {label} misses "
                    f"{final.ids[reach[needed - 1]]}, acknowledged before it began"
                )
        # A read that starts inside the final state starts where it starts:
        # whatever the final state holds before that was hidden, then came back.
        if read.ids and final_place.get(read.ids[0], 0) > first_other:
            anomalies.append(
                f"{where} {label} starts at {read.ids[0]}, after messages the final "
                "state still holds"
            )
        if retained is not None:
            if len(read.ids) > retained:
                anomalies.append(
                    f"{where} {label} holds {len(read.ids)} messages of a log "
                    f"bounded at {retained}"
                )
        elif window_limit is None:
            if read.ids != final.ids[: len(read.ids)]:
                anomalies.append(f"{where} {label} is not a prefix of the final state")
        else:
            _check_window_shape(
                where, label, read.ids, read.roles, window_limit, anomalies
            )
    if order_ok:
        _check_read_progress(where, reads, chain, rank, anomalies)


def _successors(
    where: str, observations: Sequence[Sequence[str]], anomalies: list[str]
) -> tuple[dict[str, str], bool]:
    """The one 'immediately follows' relation all observations must agree on."""
    successor: dict[str, str] = {}
    predecessor: dict[str, str] = {}
    ok = True
    for ids in observations:
        for before, after in itertools.pairwise(ids):
            known = successor.setdefault(before, after)
            if known != after:
                anomalies.append(
                    f"{where} order disagrees: {before} is followed by {known} in "
                    f"one observation and by {after} in another (a hole or a reorder)"
                )
                ok = False
            known = predecessor.setdefault(after, before)
            if known != before:
                anomalies.append(
                    f"{where} order disagrees: {after} follows {known} in one "
                    f"observation and {before} in another"
                )
                ok = False
    return successor, ok


def _chains(successor: Mapping[str, str]) -> tuple[dict[str, int], dict[str, int]]:
    """Number the chains of the successor relation and rank ids along them."""
    targets = set(successor.values())
    chain: dict[str, int] = {}
    rank: dict[str, int] = {}
    for number, start in enumerate(s for s in successor if s not in targets):
        node: str | None = start
        step = 0
        while node is not None and node not in chain:
            chain[node] = number
            rank[node] = step
            step += 1
            node = successor.get(node)
    return chain, rank


def _check_read_progress(
    where: str,
    reads: Sequence[Read],
    chain: Mapping[str, int],
    rank: Mapping[str, int],
    anomalies: list[str],
) -> None:
    """A read that began after another ended never moves back in the order."""
    done = sorted((r for r in reads if r.ids), key=lambda r: r.complete)
    started = sorted((r for r in reads if r.ids), key=lambda r: r.invoke)
    best_start: dict[int, int] = {}
    best_end: dict[int, int] = {}
    index = 0
    for read in started:
        while index < len(done) and done[index].complete < read.invoke:
            earlier = done[index]
            for ids, best in (
                (earlier.ids[0], best_start),
                (earlier.ids[-1], best_end),
            ):
                if ids in chain:
                    best[chain[ids]] = max(best.get(chain[ids], -1), rank[ids])
            index += 1
        first, last = read.ids[0], read.ids[-1]
        if first in chain and rank[first] < best_start.get(chain[first], -1):
            anomalies.append(
                f"{where} a read starts at {first}, before where an earlier read "
                "started: an evicted message came back"
            )
        if last in chain and rank[last] < best_end.get(chain[last], -1):
            anomalies.append(
                f"{where} a read ends at {last}, before where an earlier read "
                "ended: acknowledged messages vanished"
            )
