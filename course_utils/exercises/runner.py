"""How a checker calls the learner's function (or module) as training does (for
:mod:`.in_training`): the arguments moved to a device, float tensors turned into leaves whose
gradients are compared and passed on inside a graph (as a model's activations), copies kept to
see what the call changed in place."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from course_utils.lab.language import tr

__all__ = ["Prepared", "Runner", "changed_in_place"]

_GRAD_DTYPES = (torch.float32, torch.float64)


class Prepared:
    """One call made ready: ``thunk()`` runs it; ``leaves`` (name -> tensor whose gradient is
    compared), ``inputs`` (name -> (what was passed, a copy from before the call)), ``module``
    (the learner's module, or None) and ``origins`` (tensors made before the call, named, for
    the device stage)."""

    def __init__(self, thunk, leaves, inputs, module=None, origins=None) -> None:
        self.thunk, self.leaves, self.inputs = thunk, leaves, inputs
        self.module, self.origins = module, origins or {}


class Runner:
    """Prepares a plain function's call: float32/float64 tensors become leaves named after
    the parameters, passed on as non-leaf copies (as a model passes its activations); an
    ``nn.Module`` argument is copied and its parameters become leaves (``w_q.weight``); lists
    and dicts are watched for changes too."""

    kind = "function"

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def input_name(self, args: tuple) -> str:
        named = self._named(args, {})
        return next((n for n, v in named if isinstance(v, torch.Tensor)), tr("the input"))

    def _named(self, args: tuple, kwargs: dict) -> list[tuple[str, object]]:
        names = self.names + [
            tr("argument {index}").format(index=i) for i in range(len(self.names), len(args))
        ]
        return list(zip(names, args)) + list(kwargs.items())

    def prepare(self, function: Callable, args: tuple, kwargs: dict, *, device: str = "cpu",
                grad: bool = True, train: bool = True) -> Prepared:  # fmt: skip
        leaves: dict[str, torch.Tensor] = {}
        inputs: dict[str, tuple] = {}
        passed = {}
        for name, value in self._named(args, kwargs):
            passed[name] = self._pass(name, value, device, grad, leaves, inputs)
        positional = [passed[n] for n, _ in self._named(args, {})]
        keywords = {k: passed[k] for k in kwargs}
        return Prepared(lambda: function(*positional, **keywords), leaves, inputs)

    def _pass(self, name, value, device, grad, leaves, inputs):
        if isinstance(value, torch.Tensor):
            tensor = value.detach().to(device)
            if grad and tensor.dtype in _GRAD_DTYPES:
                leaf = tensor.clone().requires_grad_(True)
                leaves[name] = leaf
                tensor = leaf.clone()  # inside a graph, as a model's activation
            inputs[name] = (tensor, tensor.detach().clone())
            return tensor
        if isinstance(value, nn.Module):
            module = copy.deepcopy(value).to(device)
            for key, parameter in module.named_parameters():
                leaves[f"{name}.{key}"] = parameter
            return module
        if isinstance(value, (list, dict)):
            inputs[name] = (value, copy.deepcopy(value))
        return value


def changed_in_place(passed, before) -> bool:
    """Whether ``passed`` (an argument after the call) differs from ``before`` (its copy)."""
    if isinstance(passed, torch.Tensor):
        if passed.device.type == "meta":
            return False
        now = passed.detach()
        return now.shape != before.shape or not torch.equal(
            now.nan_to_num(0.0, 1.0, -1.0) if now.is_floating_point() else now,
            before.nan_to_num(0.0, 1.0, -1.0) if before.is_floating_point() else before,
        )
    if isinstance(passed, nn.Module) and isinstance(before, nn.Module):
        now, then = passed.state_dict(), before.state_dict()
        return now.keys() != then.keys() or any(changed_in_place(now[k], then[k]) for k in now)
    if not isinstance(passed, (list, dict, set)):
        return False
    try:
        return bool(passed != before)
    except Exception:  # not comparable: say nothing
        return False


def _floats(output) -> list[torch.Tensor]:
    items = output if isinstance(output, (tuple, list)) else (output,)
    return [t for t in items if isinstance(t, torch.Tensor) and t.is_floating_point()]


def copies(args, kwargs):
    """Copies of a call's arguments (see :func:`copy_value`)."""
    return tuple(copy_value(a) for a in args), {k: copy_value(v) for k, v in kwargs.items()}


def copy_value(value):
    """A copy of an argument, so that a call cannot change the case (tensors detached)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    try:
        return copy.deepcopy(value)
    except Exception:  # not copyable: pass it as it is
        return value


def _plain(output):
    if isinstance(output, torch.Tensor):
        return output.detach()
    if isinstance(output, (tuple, list)):
        return tuple(_plain(o) for o in output)
    return output


def _ints(output) -> list[torch.Tensor]:
    items = output if isinstance(output, (tuple, list)) else (output,)
    return [t for t in items if isinstance(t, torch.Tensor)]
