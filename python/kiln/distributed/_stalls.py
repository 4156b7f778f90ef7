"""Naming the ranks a timed-out collective waited for.

Note [Naming the ranks that did not arrive]
A collective that times out knows only that some peer did not send or receive in time; Gloo's
and NCCL's errors cannot say which. The ranks that did arrive all time out together (they
started the same collective within moments of each other and share its timeout), so when a
synchronous collective of a group fails with a timeout, each of them writes what it was
waiting in to the store under ``stalled/<group>/<group rank>`` and waits a short grace period
for the others' reports. A rank without a report did not arrive (it is busy elsewhere, stuck
outside any collective, or dead); a rank whose report names another op is waiting in a
different collective (the ranks called collectives in different orders). The error then
names those ranks by their global rank. This costs nothing until a timeout: no store traffic
on the normal path. A store that is gone (its host died) leaves the original error as it is.
"""

from datetime import timedelta


def is_timeout(error):
    text = str(error)
    return "Timed out" in text or "timed out" in text


def grace_seconds(timeout_seconds):
    """How long to wait for the other ranks' reports: ranks that time out together report
    within moments, so a little, but longer for long timeouts (their starts spread more)."""
    return min(10.0, max(1.0, 0.1 * timeout_seconds))


def describe_stalled_ranks(store, group, op, this_rank):
    """A sentence naming the global ranks of `group` that did not reach `op`, or "" when the
    store cannot tell (it is gone, or every rank reported the same op)."""
    prefix = f"stalled/{group.group_name}"
    keys = [f"{prefix}/{r}" for r in range(group.size())]
    try:
        store.set(keys[group.rank()], op.encode())
        try:
            store.wait(keys, timedelta(seconds=grace_seconds(group._timeout)))
        except RuntimeError:
            pass  # the ranks that never report are the answer
        reports = {r: (store.get(k).decode() if store.check([k]) else None)
                   for r, k in enumerate(keys)}
    except RuntimeError:
        return ""
    missing = [group._ranks[r] for r, what in reports.items() if what is None]
    elsewhere = {group._ranks[r]: what for r, what in reports.items()
                 if what is not None and what != op}
    parts = []
    if missing:
        parts.append(f"rank(s) {missing} did not arrive (no report of a timed-out collective "
                     f"within {grace_seconds(group._timeout):g} s)")
    if elsewhere:
        parts.append("; ".join(f"rank {r} was waiting in {what}"
                               for r, what in sorted(elsewhere.items())))
    if not parts:
        return ""
    return (f"[{op}] rank {this_rank}: group {group.group_name} (ranks {group._ranks}) timed "
            f"out: " + "; ".join(parts))
