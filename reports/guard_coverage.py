"""Which kinds of guard Dynamo built for a campaign's programs, of all the
kinds its GuardBuilder has (``harness.capabilities.guard_kinds``).

A kind no program made is a check of torch/_dynamo/guards.py that no changed
call could have caught dropping or misbuilding: the campaign is blind there,
whatever it found elsewhere. Workers report the kinds of each program's
guards (its first entry and the entries its changed calls compiled); the
ledger counts programs per kind, so ``report merge`` sums them like every
other count.
"""

from __future__ import annotations

from collections import Counter


def kinds(guards: list[str]) -> list[str]:
    """The kinds of a capture's recorded guards (``"KIND source"``, harness.observe)."""
    return sorted({g.split(" ", 1)[0] for g in guards if g})


def summary(built: Counter, known: list[str] | None) -> dict:
    """Programs per kind built; the kinds this torch has that none built (``known``: None where the
    campaign did not record them, e.g. one read back from an older log)."""
    out: dict = {"built": dict(built.most_common())}
    if known:
        out["known"] = len(known)
        out["never"] = sorted(k for k in known if k not in built)
    return out


def line(g: dict | None) -> str:
    if not g or not g.get("built"):
        return ""
    if "known" not in g:
        return f"guard kinds built: {len(g['built'])}"
    never = g["never"]
    return (f"guard kinds built: {g['known'] - len(never)} of the {g['known']} this torch's GuardBuilder has"
            + (f"; never: {', '.join(never)}" if never else ""))


def markdown(g: dict | None) -> list[str]:
    text = line(g)
    if not text:
        return []
    rows = [f"| `{k}` | {n} |" for k, n in g["built"].items()]
    return ["## Guard kinds", "", text[0].upper() + text[1:] + ". A kind no program built is a check no changed "
            "call could catch dropped.", "", "| guard kind | programs |", "|---|---|", *rows, ""]
