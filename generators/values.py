"""The Python values a program passes around (list and slice literals, dtype
and callable objects), the float dtypes, and the key under which two values
compute the same. Both the IR and the op catalogue speak them, so they live
below both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

Shape = tuple[int, ...]
FLOATS = ("float32", "float64", "bfloat16", "float16")


@dataclass(frozen=True)
class PyList:
    """A list literal (tuples are plain tuples)."""

    items: tuple


@dataclass(frozen=True)
class PySlice:
    start: Optional[int] = None
    stop: Optional[int] = None
    step: Optional[int] = None


@dataclass(frozen=True)
class DType:
    """A ``torch.<name>`` dtype object passed as a Python value."""

    name: str


@dataclass(frozen=True)
class Fn:
    """A callable passed as a Python value, written as its dotted name
    (``torch.sin``, ``torch.Tensor.neg``)."""

    name: str


@dataclass(frozen=True)
class Sub:
    """An instance of a trivial subclass of int or float (``IntSub(2)``):
    equal to its base value under ``==``, yet of another type, which code
    may read (``type(v) is int``)."""

    cls: str  # a key of SUBCLASSES
    value: Union[int, float]


SUBCLASSES = {"IntSub": "int", "FloatSub": "float"}

Value = Union[int, float, bool, str, None, tuple, PyList, PySlice, DType, Fn, Sub]


# The one NaN object programs hold: the IR's frozen dataclasses compare fields
# as tuples, which find NaN equal to itself only by identity.
NAN = float("nan")


def typed_key(value: Any) -> Any:
    """A key under which two values are equal only if they compute the same:
    ``1``, ``1.0`` and ``True`` differ, and so do ``(1,)`` and ``[1]``; floats
    compare bitwise (``0.0`` and ``-0.0`` differ, every NaN is the same)."""
    if isinstance(value, tuple):
        return ("tuple", tuple(typed_key(v) for v in value))
    if isinstance(value, PyList):
        return ("list", tuple(typed_key(v) for v in value.items))
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, Sub):
        return (value.cls, typed_key(value.value))
    return (type(value).__name__, value)


def base_value(value: Any) -> Any:
    """The plain Python value a subclass instance equals (others as they are)."""
    return value.value if isinstance(value, Sub) else value


def equal_values(value: Any) -> tuple:
    """Values equal to ``value`` under ``==`` but of another Python type,
    simplest first: what a comparison of values, not of types, confuses."""
    value = base_value(value)
    out: list = []
    if isinstance(value, bool):
        out += [int(value), float(value)]
    elif isinstance(value, int):
        out += [float(value), Sub("IntSub", value)] + ([bool(value)] if value in (0, 1) else [])
    elif isinstance(value, float) and value == value and abs(value) != float("inf"):
        out += ([int(value)] if value.is_integer() else []) + [Sub("FloatSub", value)]
        out += [bool(value)] if value in (0.0, 1.0) else []
    elif isinstance(value, tuple):
        out.append(PyList(value))
    elif isinstance(value, PyList):
        out.append(tuple(value.items))
    return tuple(out)
