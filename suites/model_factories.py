"""Plain-torch model factories for the model-check tests (no transformers):
``package.module:name`` callables returning (model, inputs)."""

from __future__ import annotations

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Stack(nn.Module):
    """Three identical layers: the repeats deduplication should merge."""

    def __init__(self, width: int = 8, depth: int = 3):
        super().__init__()
        self.layers = nn.ModuleList(Layer(width) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def stack():
    return Stack(), (torch.randn(2, 4, 8, requires_grad=True),)


def stack_kwargs():
    return Stack(), lambda: {"x": torch.randn(2, 4, 8)}


def not_a_pair():
    return Stack()


class Labelled(Stack):
    """Sets an attribute on its first call, as transformers' classifiers set
    ``config.problem_type``: the same call rightly recompiles once."""

    def __init__(self):
        super().__init__()
        self.problem_type = None

    def forward(self, x):
        if self.problem_type is None:
            self.problem_type = "regression"
        return super().forward(x)


def labelled():
    return Labelled(), (torch.randn(2, 4, 8, requires_grad=True),)


def own_random_backend(gm, example_inputs):
    """A backend that runs the graph after drawing a random number of its own:
    its dropout masks differ from eager's under one seed."""
    def run(*args):
        torch.rand(1)
        return gm(*args)
    return run
