"""Spellings: the other ways Python lets one op of the catalogue be written.

A backend never sees Python: it sees the FX graph Dynamo hands it, where one
computation arrives as another node depending on how the program spelled
it. ``torch.relu(x)`` is a call_function of ``torch.relu``, ``F.relu(x)`` one
of ``F.relu``, ``x.relu()`` a call_method, an ``nn.ReLU`` instance a call of
``F.relu`` whose ``nn_module_stack`` names the module, and
``torch.ops.aten.relu.default(x)`` an OpOverload; a backend that pattern-
matches one of them may mishandle the others. So each op lists, by kind
(``KINDS``), the spellings torch accepts for exactly its computation (bitwise
in eager, forward and backward: ``suites/test_spellings.py`` checks every one
against the installed torch). The op's own ``fmt`` is its default spelling
("" in the IR, ``Stmt.spelling``); a statement names at most one other.

A spelling is a template like ``OpSpec.fmt``, except a ``module`` one: its
template builds the instance (one per statement, a module global written
beside the program's other globals, so its Python operands must be literals)
and the statement applies it to the primary. ``inplace`` and ``out`` forms
(``KEEPS``) write the result into a fresh tensor of the primary's type (a
clone, ``torch.empty_like``), so aliasing stays as the default's; they apply
only where the result has the primary's type, and ``out=`` only where nothing
requires grad (autograd refuses ``out=``). Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

# Simplest first: a draw that shrinks takes the default, then these in order.
KINDS = ("torch", "functional", "method", "operator", "module", "aten", "inplace", "out")
# Forms that write into a fresh tensor of the primary's shape and dtype.
KEEPS = ("inplace", "out")


@dataclass(frozen=True)
class Spelling:
    kind: str  # one of KINDS
    fmt: str  # as OpSpec.fmt; for a module, the constructor of its instance


@dataclass(frozen=True)
class Entry:
    default: str  # the kind of the op's own fmt
    forms: tuple[Spelling, ...]  # the others, each of another kind

    def get(self, kind: str) -> Spelling | None:
        return next((s for s in self.forms if s.kind == kind), None)


def _aten(name: str, args: str = "{0}") -> str:
    return f"torch.ops.aten.{name}({args})"


OUT_LIKE = "out=torch.empty_like({0})"


def _out(call: str) -> str:
    """``call`` into ``out=`` a fresh tensor like the primary: ``torch.sin({0}``
    becomes ``torch.sin({0}, out=torch.empty_like({0}))``."""
    return f"{call}, {OUT_LIKE})"


def contiguous_out(fmt: str) -> str:
    """An ``out=`` form writing into a contiguous tensor: Dynamo graph-breaks at an ``out=`` tensor that is not
    contiguous ("Attempted to call op with non-contiguous `out=` tensor"), which fullgraph makes an error by
    design, and a primary may be a transposed view; a program compiled without fullgraph keeps the tensor like
    the primary, and Dynamo's break with it."""
    return fmt.replace(OUT_LIKE, "out=torch.empty_like({0}, memory_format=torch.contiguous_format)")


def _pointwise(fn: str, default: str = "torch", arg: str = "{0}", **more: str) -> Entry:
    """A unary pointwise ``torch.<fn>`` of ``arg`` (``{0}``, or an expression
    of it that makes a fresh tensor): as a method, an aten overload, in place
    on a fresh tensor (a clone of ``{0}``), into ``out=``, and ``more``."""
    recv = "{0}" if arg == "{0}" else f"({arg})"
    fresh = "{0}.clone()" if arg == "{0}" else recv
    return _entry(default, torch=f"torch.{fn}({arg})", method=f"{recv}.{fn}()", aten=_aten(f"{fn}.default", arg),
                  inplace=f"{fresh}.{fn}_()", out=_out(f"torch.{fn}({arg}"), **more)


def _binary(fn: str, default: str, rhs: str = "{1}", aten: str = "Tensor", inplace: bool = True, **more: str) -> Entry:
    """A binary ``torch.<fn>({0}, rhs)``: as a function, a method, an aten
    overload, in place on a clone of ``{0}``, into ``out=``, and ``more``."""
    forms = {
        "torch": f"torch.{fn}({{0}}, {rhs})",
        "method": f"{{0}}.{fn}({rhs})",
        "aten": _aten(f"{fn}.{aten}", f"{{0}}, {rhs}"),
        "out": _out(f"torch.{fn}({{0}}, {rhs}"),
        **more,
    }
    if inplace:
        forms["inplace"] = f"{{0}}.clone().{fn}_({rhs})"
    return _entry(default, **forms)


def _entry(default: str, **forms: str) -> Entry:
    """The op's default kind and its other spellings, by kind (the default's
    own kind left out), in ``KINDS`` order."""
    assert default in KINDS and all(k in KINDS for k in forms), (default, forms)
    return Entry(default, tuple(Spelling(k, forms[k]) for k in KINDS if k in forms and k != default))


def _reduce(fn: str, default: str, aten: str, keyword: str = "dim={1}, keepdim={2}",
            positional: str = "{1}, {2}") -> Entry:
    """A reduction ``{0}.<fn>(dim=..., keepdim=...)``: as a function, a method, an aten overload."""
    return _entry(default, torch=f"torch.{fn}({{0}}, {keyword})", method=f"{{0}}.{fn}({keyword})",
                  aten=_aten(aten, f"{{0}}, {positional}"))


SPELLINGS: dict[str, Entry] = {
    # pointwise unary
    "sin": _pointwise("sin"),
    "cos": _pointwise("cos"),
    "tanh": _pointwise("tanh", functional="F.tanh({0})", module="nn.Tanh()"),
    "sigmoid": _pointwise("sigmoid", functional="F.sigmoid({0})", module="nn.Sigmoid()"),
    "neg": _pointwise("neg", default="operator"),
    "abs": _pointwise("abs", operator="abs({0})"),
    "erf": _pointwise("erf"),
    "atan": _pointwise("atan"),
    "square": _pointwise("square"),
    "log1p_abs": _pointwise("log1p", arg="{0}.abs()"),
    "rsqrt_abs": _pointwise("rsqrt", arg="{0}.abs() + 1"),
    "exp_neg_abs": _pointwise("exp", arg="-{0}.abs()"),
    "clone": _entry("method", torch="torch.clone({0})", aten=_aten("clone.default")),
    # activations
    "relu": _entry("functional", torch="torch.relu({0})", method="{0}.relu()", module="nn.ReLU()",
                   aten=_aten("relu.default"), inplace="{0}.clone().relu_()"),
    "gelu": _entry("functional", module="nn.GELU(approximate={1})", aten=_aten("gelu.default", "{0}, approximate={1}")),
    # (no in-place forms of these four: leaky_relu_ refuses backward for a NaN or
    # negative slope, and elu_, celu_ and selu_ take gradients from the result,
    # rounding otherwise than from the input)
    "leaky_relu": _entry("functional", module="nn.LeakyReLU(negative_slope={1})",
                         aten=_aten("leaky_relu.default", "{0}, {1}")),
    "elu": _entry("functional", module="nn.ELU(alpha={1})", aten=_aten("elu.default", "{0}, {1}")),
    "celu": _entry("functional", torch="torch.celu({0}, alpha={1})", module="nn.CELU(alpha={1})",
                   aten=_aten("celu.default", "{0}, {1}")),
    "selu": _entry("functional", torch="torch.selu({0})", module="nn.SELU()", aten=_aten("selu.default")),
    "softplus": _entry("functional", module="nn.Softplus(beta={1})", aten=_aten("softplus.default", "{0}, {1}")),
    "hardtanh": _entry("functional", module="nn.Hardtanh({1}, {2})", aten=_aten("hardtanh.default", "{0}, {1}, {2}"),
                       inplace="F.hardtanh_({0}.clone(), {1}, {2})"),
    "silu": _entry("functional", module="nn.SiLU()", aten=_aten("silu.default"),
                   inplace="F.silu({0}.clone(), inplace=True)"),
    "mish": _entry("functional", module="nn.Mish()", aten=_aten("mish.default"),
                   inplace="F.mish({0}.clone(), inplace=True)"),
    "hardswish": _entry("functional", module="nn.Hardswish()", aten=_aten("hardswish.default"),
                        inplace="F.hardswish({0}.clone(), inplace=True)"),
    "relu6": _entry("functional", module="nn.ReLU6()", aten=_aten("relu6.default"),
                    inplace="F.relu6({0}.clone(), inplace=True)"),
    # binary with broadcasting
    "add": _binary("add", "operator"),
    "sub": _binary("sub", "operator"),
    "mul": _binary("mul", "operator"),
    "div": _binary("div", "operator", rhs="{1}.abs() + 1"),
    "maximum": _binary("maximum", "torch", aten="default", inplace=False),
    "minimum": _binary("minimum", "torch", aten="default", inplace=False),
    "atan2": _binary("atan2", "torch", aten="default"),
    "add_alpha": _binary("add", "torch", rhs="{1}, alpha={2}"),
    "lerp": _binary("lerp", "torch", rhs="{1}, {2}", aten="Scalar"),
    # Python scalars
    "mul_scalar": _binary("mul", "operator", aten="Scalar"),
    "add_scalar": _binary("add", "operator", aten="Scalar"),
    "rsub_scalar": _entry("operator", torch="torch.rsub({0}, {1})", aten=_aten("rsub.Scalar", "{0}, {1}")),
    "div_scalar": _binary("div", "operator", aten="Scalar"),
    "pow_scalar": _entry("method", torch="torch.pow({0}.abs(), {1})", operator="{0}.abs() ** {1}",
                         aten=_aten("pow.Tensor_Scalar", "{0}.abs(), {1}"), inplace="{0}.abs().pow_({1})",
                         out=_out("torch.pow({0}.abs(), {1}")),
    "clamp": _entry("method", torch="torch.clamp({0}, min={1}, max={2})", aten=_aten("clamp.default", "{0}, {1}, {2}"),
                    inplace="{0}.clone().clamp_(min={1}, max={2})", out=_out("torch.clamp({0}, min={1}, max={2}")),
    # comparisons and where
    "gt": _entry("operator", torch="torch.gt({0}, {1})", method="{0}.gt({1})", aten=_aten("gt.Tensor", "{0}, {1}")),
    "lt_scalar": _entry("operator", torch="torch.lt({0}, {1})", method="{0}.lt({1})",
                        aten=_aten("lt.Scalar", "{0}, {1}")),
    "logical_not": _entry("torch", method="({0} > 0).logical_not()", operator="~({0} > 0)",
                          aten=_aten("logical_not.default", "{0} > 0")),
    "where": _entry("torch", method="{0}.where({1} > 0, {2})", aten=_aten("where.self", "{1} > 0, {0}, {2}")),
    "masked_fill": _entry("method", torch="torch.masked_fill({0}, {0} > {1}, {2})",
                          aten=_aten("masked_fill.Scalar", "{0}, {0} > {1}, {2}"),
                          inplace="{0}.clone().masked_fill_({0} > {1}, {2})"),
    # reductions
    "sum": _reduce("sum", "method", "sum.dim_IntList"),
    "mean": _reduce("mean", "method", "mean.dim"),
    "mean_dims": _reduce("mean", "method", "mean.dim", keyword="dim={1}", positional="{1}"),
    "amax": _reduce("amax", "method", "amax.default"),
    "amin": _reduce("amin", "method", "amin.default"),
    "var": _reduce("var", "method", "var.correction", keyword="dim={1}, keepdim={2}, correction=0",
                   positional="{1}, correction=0, keepdim={2}"),
    "logsumexp": _reduce("logsumexp", "torch", "logsumexp.default"),
    "norm": _entry("torch", aten=_aten("linalg_vector_norm.default", "{0}, 2, {1}, {2}")),
    "sum_all": _entry("method", torch="torch.sum({0})", aten=_aten("sum.default")),
    "argmax": _reduce("argmax", "method", "argmax.default"),
    # matmul and convolutions
    "matmul": _entry("operator", torch="torch.matmul({0}, {1})", method="{0}.matmul({1})",
                     aten=_aten("matmul.default", "{0}, {1}")),
    "matmul_t": _entry("operator", torch="torch.matmul({0}, {1}.transpose(-1, -2))",
                       method="{0}.matmul({1}.transpose(-1, -2))"),
    "bmm": _entry("torch", method="{0}.reshape({1}).bmm({2}).reshape({3})",
                  operator="({0}.reshape({1}) @ {2}).reshape({3})",
                  aten=_aten("bmm.default", "{0}.reshape({1}), {2}") + ".reshape({3})"),
    "linear": _entry("functional", aten=_aten("linear.default", "{0}, {1}, {2}")),
    # (F.conv1d is torch.conv1d: one callable, one node)
    "conv1d": _entry("functional", aten=_aten("conv1d.default", "{0}, {1}, None, [1], [1]")),
    "conv2d": _entry("functional", aten=_aten("conv2d.default", "{0}, {1}, None, [1, 1], [1, 1]")),
    # norms and softmax
    "layer_norm": _entry("functional", torch="torch.layer_norm({0}, {1})",
                         module="nn.LayerNorm({1}, elementwise_affine=False)",
                         aten=_aten("layer_norm.default", "{0}, {1}")),
    "layer_norm_affine": _entry("functional", torch="torch.layer_norm({0}, {1}, {2}, {3})",
                                aten=_aten("layer_norm.default", "{0}, {1}, {2}, {3}")),
    # (Dynamo inlines F.rms_norm into a torch.rms_norm node)
    "rms_norm": _entry("functional", module="nn.RMSNorm({1}, elementwise_affine=False)", aten=_aten("rms_norm.default", "{0}, {1}")),
    "group_norm": _entry("functional", torch="torch.group_norm({0}, {1})",
                         aten=_aten("group_norm.default", "{0}, {1}")),
    "softmax": _entry("torch", functional="F.softmax({0}, dim={1})", method="{0}.softmax({1})",
                      module="nn.Softmax(dim={1})", aten=_aten("softmax.int", "{0}, {1}")),
    "log_softmax": _entry("torch", functional="F.log_softmax({0}, dim={1})", method="{0}.log_softmax({1})",
                          module="nn.LogSoftmax(dim={1})", aten=_aten("log_softmax.int", "{0}, {1}")),
    # where signs of zero, NaN and infinities show
    "copysign": _binary("copysign", "torch", aten="Scalar"),
    "copysign_t": _binary("copysign", "torch"),
    "reciprocal": _pointwise("reciprocal"),
    "div_raw": _binary("div", "operator"),
    "signbit": _entry("torch", method="{0}.signbit()", aten=_aten("signbit.default")),
    "nan_to_num": _entry("torch", method="{0}.nan_to_num(nan={1}, posinf={2}, neginf={3})",
                         aten=_aten("nan_to_num.default", "{0}, {1}, {2}, {3}"),
                         inplace="{0}.clone().nan_to_num_(nan={1}, posinf={2}, neginf={3})",
                         out=_out("torch.nan_to_num({0}, nan={1}, posinf={2}, neginf={3}")),
    # joining and splitting
    "cat": _entry("torch", aten=_aten("cat.default", "[{0}, {1}], {2}")),
    "stack": _entry("torch", aten=_aten("stack.default", "[{0}, {1}], {2}")),
    "split": _entry("torch", method="{0}.split({1}, dim={2})[0]", aten=_aten("split.Tensor", "{0}, {1}, {2}") + "[0]"),
    "chunk": _entry("method", torch="torch.chunk({0}, {1}, dim={2})[-1]",
                    aten=_aten("chunk.default", "{0}, {1}, {2}") + "[-1]"),
    "unbind": _entry("method", torch="torch.unbind({0}, {1})[0]", aten=_aten("unbind.int", "{0}, {1}") + "[0]"),
    # indexing and views
    "index": _entry("operator", torch="torch.select({0}, 0, {1})", method="{0}.select(0, {1})",
                    aten=_aten("select.int", "{0}, 0, {1}")),
    "narrow": _entry("method", torch="torch.narrow({0}, {1}, 0, 1)", aten=_aten("narrow.default", "{0}, {1}, 0, 1")),
    "view": _entry("method", aten=_aten("view.default", "{0}, {1}")),
    "reshape": _entry("method", torch="torch.reshape({0}, {1})", aten=_aten("reshape.default", "{0}, {1}")),
    "flatten": _entry("method", torch="torch.flatten({0})", module="nn.Flatten(0, -1)",
                      aten=_aten("flatten.using_ints")),
    "transpose": _entry("method", torch="torch.transpose({0}, {1}, {2})",
                        aten=_aten("transpose.int", "{0}, {1}, {2}")),
    "permute": _entry("method", torch="torch.permute({0}, {1})", aten=_aten("permute.default", "{0}, {1}")),
    "expand": _entry("method", aten=_aten("expand.default", "{0}, {1}")),
    "contiguous": _entry("method", aten=_aten("contiguous.default")),
    "unsqueeze": _entry("method", torch="torch.unsqueeze({0}, {1})", aten=_aten("unsqueeze.default", "{0}, {1}")),
    "squeeze": _entry("method", torch="torch.squeeze({0}, {1})", aten=_aten("squeeze.dim", "{0}, {1}")),
    "movedim": _entry("method", torch="torch.movedim({0}, {1}, {2})", aten=_aten("movedim.int", "{0}, {1}, {2}")),
    # dtype conversion
    "to_dtype": _entry("method", aten=_aten("to.dtype", "{0}, {1}")),
    "type_as": _entry("method", aten=_aten("type_as.default", "{0}, {1}")),
    # in-place ops: another way to write the same write
    "add_": _entry("method", operator="{out} = {0}\n{out} += {1}", aten=_aten("add_.Tensor", "{0}, {1}"),
                   out="torch.add({0}, {1}, out={0})"),
    # (no aten.mul_.Scalar: it rounds a bfloat16 product of a subnormal scalar otherwise than mul_)
    "mul_": _entry("method", operator="{out} = {0}\n{out} *= {1}", out="torch.mul({0}, {1}, out={0})"),
    "clamp_": _entry("method", torch="torch.clamp_({0}, min={1})", aten=_aten("clamp_.default", "{0}, {1}")),
    "relu_": _entry("method", torch="torch.relu_({0})", module="nn.ReLU(inplace=True)",
                    aten=_aten("relu_.default")),
    "sigmoid_": _entry("method", torch="torch.sigmoid_({0})", aten=_aten("sigmoid_.default")),
    "copy_": _entry("method", aten=_aten("copy_.default", "{0}, {1}")),
}


def spelling(op: str, kind: str) -> Spelling | None:
    """Op ``op``'s spelling of ``kind`` ("" is the default: None)."""
    entry = SPELLINGS.get(op)
    return entry.get(kind) if entry is not None and kind else None


def kinds_of(op: str) -> tuple[str, ...]:
    """The kinds ``op`` may be spelled in besides its default, simplest first."""
    entry = SPELLINGS.get(op)
    return tuple(s.kind for s in entry.forms) if entry is not None else ()


def template(op_fmt: str, op: str, kind: str, instance: str = "") -> str:
    """The template a statement of ``op`` spelled ``kind`` is written with
    (``op_fmt`` for the default); a module is called as ``instance``."""
    form = spelling(op, kind)
    if form is None:
        return op_fmt
    return f"{instance}({{0}})" if form.kind == "module" else form.fmt


def instance_name(block: str, out: str) -> str:
    """The module global a ``module`` spelling of statement ``out`` of block
    ``block`` ("" the layer) calls."""
    return f"MOD_{block.upper()}_{out.upper()}" if block else f"MOD_{out.upper()}"


def drawn_kinds() -> tuple[str, ...]:
    """The kinds some op of the catalogue is spelled in: what a draw must reach."""
    used = {s.kind for entry in SPELLINGS.values() for s in entry.forms}
    return tuple(k for k in KINDS if k in used)
