"""The one value every oracle returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Status(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    # The oracle could not decide (NaN/Inf in the reference, eager disagreeing
    # with itself): neither a pass nor a finding.
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Verdict:
    oracle: str
    status: Status
    kind: str = ""  # what went wrong, e.g. "mismatch", "dtype", "missing_grad", "crash"
    where: str = ""  # which value, e.g. "output[0]" or "grad[param:w0]"
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL

    def __str__(self) -> str:
        head = f"{self.oracle}: {self.status.value}"
        if self.kind:
            head += f" [{self.kind}]"
        if self.where:
            head += f" at {self.where}"
        return f"{head}: {self.message}" if self.message else head


def combine(oracle: str, verdicts: list[Verdict]) -> Verdict:
    """The first failure wins, then the first inconclusive, else a pass."""
    for status in (Status.FAIL, Status.INCONCLUSIVE):
        for v in verdicts:
            if v.status is status:
                return v
    return Verdict(oracle, Status.PASS, message=f"{len(verdicts)} values agree")
