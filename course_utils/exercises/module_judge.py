"""Judge a learner's ``nn.Module`` part (the classes of notebooks 08-11) against the course's.

The parts the learner writes as classes (``MultiHeadAttention``, ``LayerNorm``,
``FeedForward``, ``Block``, ``Decoder``) keep the attribute names of the course's
:mod:`.solution_model`, so a checker builds the learner's module, loads the same random
weights the reference gets (``load_state_dict`` by name) and compares what ``forward``
returns, case by case, with :func:`.judge.judge`. Before that it checks what ``judge`` cannot
see: that the answer is the class (not an instance), that it can be built with the exercise's
arguments, and that its parameters have the fixed names and shapes (a missing or renamed
attribute is named; a registered buffer is told apart from a parameter). After every case
matches in eval mode, :mod:`.in_training` runs it as training does: in train mode, one
backward pass with every parameter's gradient compared by name, the input left alone, and
on the meta device. A part that passes is saved for the learner's model
(:func:`course_utils.exercises.keeping.keep`), and the line says where.

Writing a checker::

    cases = [Case(24, 3, x, label="d_model=24, n_heads=3, x of shape (2, 6, 24)"), ...]
    return judge_module("MultiHeadAttention", part, Reference, cases, mistakes,
                        build_args=2, checker="check_multi_head_attention", axes="B T C")

``cases`` hold the constructor's arguments first (``build`` of them), then forward's;
``reference`` and each mistake are classes built and loaded the same way (subclasses of the
solution's class that override ``forward``, say).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence

import torch
from torch import nn

from course_utils.exercises.judge import Case, judge, report
from course_utils.exercises.runner import Prepared, Runner
from course_utils.lab.language import tr, translated

__all__ = ["ModuleRunner", "judge_module", "random_weights"]


def random_weights(reference: type, args: tuple, seed: int = 0) -> dict[str, torch.Tensor]:
    """A state dict for ``reference(*args)`` with every parameter random (norm scales near 1,
    biases and shifts not 0), so that every parameter the answer ignores shows."""
    return {k: v.clone() for k, v in _cached_weights(reference, tuple(args), seed).items()}


@functools.lru_cache(maxsize=64)
def _cached_weights(reference: type, args: tuple, seed: int) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng():
        module = reference(*args)
    generator = torch.Generator().manual_seed(seed)  # same shapes, same weights
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if parameter.dim() == 1 and name.endswith("weight"):  # a LayerNorm's scale
                parameter.copy_(1.0 + 0.3 * noise)
            elif parameter.dim() == 1:  # a bias or a shift
                parameter.copy_(0.3 * noise)
            else:  # a matrix or a table: unit-scale outputs
                parameter.copy_(noise / parameter.shape[-1] ** 0.5)
    return dict(module.state_dict())


def build(part: type, reference: type, args: tuple) -> nn.Module:
    """``part(*args)`` in eval mode holding ``reference``'s random weights; the global random
    state is left as it was."""
    with torch.random.fork_rng():
        module = part(*args)
    module.load_state_dict(random_weights(reference, args))
    return module.eval()


def judge_module(
    title: str,
    part: object,
    reference: type,
    cases: Sequence[Case],
    mistakes: Sequence[tuple[str, type]] = (),
    *,
    build_args: int,
    checker: str,
    axes: str | Sequence[str] | None = None,
    structure: Callable[[nn.Module], str | None] | None = None,
    tolerance=None,
    errors: Sequence[tuple[type, str, str]] = (),
    hint: str = "",
) -> bool:
    """Check the class ``part`` against ``reference`` on ``cases`` (module docstring); print
    one line; save the part when right. Never raises.

    ``structure(module)`` may name a mistake that equal outputs cannot show (an untied head,
    one block repeated) or a faulty sublayer; it gets the learner's module built for the
    first case, holding the reference's weights, in eval mode.
    """
    first = cases[0].args[:build_args]
    problem = _not_a_module_class(part, title, first, checker)
    problem = problem or _build_problem(part, reference, first, structure)
    if problem is not None:
        return report(title, part, problem, part=True)
    names = list(inspect.signature(reference.__init__).parameters)[1 : build_args + 1]
    names += list(inspect.signature(reference.forward).parameters)[1:]
    call = _harness(reference, build_args, names)
    return judge(
        title, part, reference, cases, mistakes, call=call, axes=axes, tolerance=tolerance,
        errors=errors, hint=hint, trains=True, runner=ModuleRunner(reference, build_args, names),
        part=True,
    )  # fmt: skip


class ModuleRunner(Runner):
    """Prepares a module's call for :mod:`.in_training`: the module built from the case's
    first ``build_args`` arguments with the reference's random weights, in train mode, on the
    device; its parameters are the leaves (``w_q.weight``) beside forward's float inputs; a
    plain tensor attribute (not a parameter or buffer) is named for the device stage."""

    kind = "module"

    def __init__(self, reference: type, build_args: int, names: list[str]) -> None:
        super().__init__(names[build_args:])
        self.reference, self.build_args = reference, build_args

    def input_name(self, args: tuple) -> str:
        return super().input_name(args[self.build_args :])

    def prepare(self, part, args, kwargs, *, device="cpu", grad=True, train=True) -> Prepared:
        module = build(part, self.reference, args[: self.build_args]).train(train)
        plain = {
            tr(
                "self.{name}, a plain tensor attribute (module.to(device) moves parameters and "
                "buffers, not it),"
            ).format(name=name): value
            for name, value in vars(module).items()
            if isinstance(value, torch.Tensor)
        }
        module = module.to(device)
        prepared = super().prepare(module, args[self.build_args :], kwargs, device=device,
                                   grad=grad)  # fmt: skip
        if grad:
            prepared.leaves.update(dict(module.named_parameters()))
        prepared.module, prepared.origins = module, plain
        return prepared


def _harness(reference: type, build_args: int, names: list[str]) -> Callable:
    """``call(part, *args)`` for :func:`.judge.judge`: build, load the weights, run forward
    without gradients. Its signature carries the argument names, so a case reads
    ``d_model=24, n_heads=3, x of shape (2, 6, 24)``."""

    def call(part, *args):
        module = build(part, reference, args[:build_args])
        with torch.no_grad():
            return module(*args[build_args:])

    parameters = [inspect.Parameter("part", inspect.Parameter.POSITIONAL_ONLY)]
    parameters += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    call.__signature__ = inspect.Signature(parameters)
    return call


def _not_a_module_class(part: object, title: str, args: tuple, checker: str) -> str | None:
    shown = ", ".join(repr(a) for a in args)
    if isinstance(part, nn.Module):
        return tr(
            "got an instance of {kind}; pass the class itself: {checker}({title}), not "
            "{checker}({title}({arguments}))"
        ).format(kind=type(part).__name__, checker=checker, title=title, arguments=shown)
    if not isinstance(part, type) or not issubclass(part, nn.Module):
        return tr("expected your class {title} (a subclass of nn.Module), got {kind}").format(
            title=title, kind=_kind(part)
        )
    return None


def _kind(value: object) -> str:
    if isinstance(value, type):
        return tr(
            "the class {name}, which is not an nn.Module: write class {name}(nn.Module)"
        ).format(name=value.__name__)
    if isinstance(value, torch.Tensor):
        return tr("a tensor of shape {shape}").format(shape=tuple(value.shape))
    return tr("a {kind}").format(kind=type(value).__name__)


def _listed(names: list[str]) -> str:
    """At most three names, then how many in all."""
    shown = ", ".join(names[:3])
    if len(names) <= 3:
        return shown
    return tr("{names}, ... ({count} in all)").format(names=shown, count=len(names))


def _names_problem(module: nn.Module, shown: str, missing: list[str], extra: list[str]) -> str:
    """Why the learner's parameter names differ from the course's, most specific cause first:
    modules kept in a plain list, biases added or left out, a wrong number of blocks; else
    the names themselves."""
    for name, value in vars(module).items():
        if isinstance(value, list | tuple) and any(isinstance(v, nn.Module) for v in value):
            return tr(
                "self.{name} is a plain Python {kind}: its modules' parameters are not part of "
                "{module} (they would not train or load); wrap it: "
                "self.{name} = nn.ModuleList([...])"
            ).format(name=name, kind=type(value).__name__, module=shown)
    if extra and not missing and all(k.endswith(".bias") for k in extra):
        return tr(
            "{module} has biases the course's model does not: {names}; build those layers "
            "with bias=False"
        ).format(module=shown, names=_listed(extra))
    if missing and not extra and all(k.endswith(".bias") for k in missing):
        return tr(
            "{module} lacks biases the course's model has: {names}; nn.Linear has one unless "
            "you pass bias=False"
        ).format(module=shown, names=_listed(missing))
    if missing and not extra and all(re.match(r"blocks\.\d+\.", k) for k in missing):
        have = len({k.split(".")[1] for k in module.state_dict() if k.startswith("blocks.")})
        wanted = max(int(k.split(".")[1]) for k in missing) + 1
        return tr(
            "{module} has {have} block(s) in self.blocks, expected {wanted} (n_layers): build "
            "one Block per layer"
        ).format(module=shown, have=have, wanted=wanted)
    buffers = {name for name, _ in module.named_buffers()}
    if extra and not missing and all(k in buffers for k in extra):
        return tr(
            "{module} registers {names} as a buffer, which goes into its state dict, so the "
            "course's weights do not load into it (an unexpected key): pass persistent=False "
            "to register_buffer, or build it in forward"
        ).format(module=shown, names=_listed(extra))
    return _names_differ(shown, missing, extra)


def _names_differ(shown: str, missing: list[str], extra: list[str]) -> str:
    """The parameters missing and the extra ones, by name."""
    fields = dict(module=shown, missing=_listed(missing), extra=_listed(extra))
    if missing and extra:
        message = tr(
            "{module} has no parameter {missing} but has {extra}: use the attribute names the "
            "exercise gives (the course's weights load by name)"
        )
    elif missing:
        message = tr(
            "{module} has no parameter {missing}: use the attribute names the exercise gives "
            "(the course's weights load by name)"
        )
    elif extra:
        message = tr(
            "{module} has extra parameters {extra}: use the attribute names the exercise gives "
            "(the course's weights load by name)"
        )
    else:
        message = tr(
            "{module}: use the attribute names the exercise gives (the course's weights load by "
            "name)"
        )
    return message.format(**fields)


def _build_problem(part: type, reference: type, args: tuple, structure) -> str | None:
    """Build the learner's module and compare its parameter names and shapes with the
    reference's: a missing, extra or renamed attribute is named."""
    shown = f"{part.__name__}({', '.join(repr(a) for a in args)})"
    try:
        with torch.random.fork_rng():
            module = part(*args)
    except NotImplementedError:
        return tr("not implemented yet")
    except Exception as error:  # the learner's __init__ may fail in any way
        wanted = ", ".join(list(inspect.signature(reference.__init__).parameters)[1:])
        return tr(
            "{module} raised {kind}: {error}; __init__ takes ({wanted}) (the exercise lists its "
            "arguments)"
        ).format(module=shown, kind=type(error).__name__, error=error, wanted=wanted)
    expected = random_weights(reference, args)
    got = module.state_dict()
    missing = [k for k in expected if k not in got]
    extra = [k for k in got if k not in expected]
    if missing or extra:
        return _names_problem(module, shown, missing, extra)
    for key, value in expected.items():
        if tuple(got[key].shape) != tuple(value.shape):
            return tr(
                "{module}'s {key} has shape {shape}, expected {expected} (the exercise gives "
                "each layer's sizes)"
            ).format(
                module=shown, key=key, shape=tuple(got[key].shape), expected=tuple(value.shape)
            )
    if structure is None:
        return None
    module.load_state_dict(expected)
    problem = structure(module.eval())
    return translated(problem)
