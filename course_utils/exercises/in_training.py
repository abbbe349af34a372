"""Judge a part the way training uses it, once its forward pass is right (:func:`.judge.judge`
runs this stage after every case matched).

A forward pass in eval mode cannot see what breaks training. For each case this stage runs the
learner's function (or module) as the model does, with gradients on and, for a module, in
train mode, its inputs handed over as tensors inside a graph (a model's activations, not
leaves), and compares with the reference:

1. the caller's tensors are left alone: each input is compared before and after the call; an
   in-place change is named with its line and the line to write instead;
2. the result in train mode: a module that differs there is named, as random (dropout the
   specification does not have) or as depending on ``self.training``;
3. one backward pass (a fixed random weighting of every float output): a backward that fails
   is named with its cause, then the gradient of every input and every parameter is compared
   with the reference's; a missing or wrong one is named ("w_q gets no gradient") with what
   the :class:`.watch.Watch` saw (``torch.no_grad()``, ``.detach()``, NumPy, with the line);
4. the device: every tensor made on the CPU inside the part (``torch.arange(T)`` without
   ``device=``, a mask built with ``torch.ones``, a plain tensor attribute of a module) that
   meets the caller's tensors is named with its line (on a GPU that stops the model). The
   :class:`.watch.Watch` tells them apart by where each tensor came from, so no second
   device is needed (moving to PyTorch's ``meta`` device costs seconds of imports in every
   new process).

A runner (:class:`Runner`, or the module judge's subclass) prepares each call: it moves the
arguments, makes the leaves whose gradients are compared and keeps copies of the inputs.
"""

from __future__ import annotations

import torch
from torch import nn

from course_utils.exercises.difference import Tolerance, difference
from course_utils.exercises.runner import (
    Prepared,
    Runner,
    _floats,
    _ints,
    _plain,
    changed_in_place,
    copies,
)
from course_utils.exercises.watch import (
    Event,
    Watch,
    in_place_remedy,
    rewrite_in_place,
    storage_of,
    traceback_line,
)
from course_utils.lab.language import tr

__all__ = ["Prepared", "Runner", "changed_in_place", "device_problem", "training_problem"]

_GRADIENT_TOLERANCE = Tolerance(atol=1e-4, rtol=1e-3)


def _pull(outputs: list[torch.Tensor], references: list[torch.Tensor]) -> torch.Tensor | None:
    """A scalar whose backward weights every output value by a fixed random number (the same
    for the answer and the reference); None when nothing requires grad."""
    generator = torch.Generator().manual_seed(5)
    total = None
    for got, want in zip(outputs, references):
        weight = torch.randn(want.shape, generator=generator, dtype=torch.float64)
        weight = weight.masked_fill(~torch.isfinite(want.detach().double().cpu()), 0.0)
        if not got.requires_grad or got.shape != want.shape:
            continue
        term = (got.nan_to_num(0.0, 0.0, 0.0) * weight.to(got.dtype)).sum()
        total = term if total is None else total + term
    return total


def _why(watch: Watch, question: str) -> str:
    """What the watch saw that cuts the graph, in a sentence; ``question`` when it saw none."""
    if watch.no_grad is not None:
        return tr(
            ": your code runs with autograd off{where} (torch.no_grad() or similar), so "
            "backward cannot reach what it computes there; remove the no_grad"
        ).format(where=_at(watch.no_grad.line))
    if watch.left_graph:
        priority = [".numpy()", ".tolist()", ".item()", ".data", ".detach()", ".detach_()"]
        event = min(watch.left_graph, key=lambda e: priority.index(e.what))
        if event.what == ".item()":
            message = tr(
                ": {event} turns a tensor into a Python number, which autograd cannot follow; "
                "compute it with torch operations on the tensors themselves"
            )
        elif event.what == ".tolist()":
            message = tr(
                ": {event} turns a tensor into Python numbers, which autograd cannot follow; "
                "compute it with torch operations on the tensors themselves"
            )
        elif event.what == ".numpy()":
            message = tr(
                ": {event} goes through NumPy, which autograd cannot follow; compute it with "
                "torch operations on the tensors themselves"
            )
        else:
            message = tr(
                ": {event} detaches a tensor from the graph, which autograd cannot follow; "
                "compute it with torch operations on the tensors themselves"
            )
        return message.format(event=event)
    return question


def _at(line: str | None) -> str:
    """`` at line N: `code` `` (where the learner's code did it), or nothing."""
    return tr(" at {line}").format(line=line) if line else ""


def _listed(names: list[str]) -> str:
    shown = names[:4]
    text = shown[0]
    if len(shown) > 1:
        text = tr("{names} and {last}").format(names=", ".join(shown[:-1]), last=shown[-1])
    if len(names) <= 4:
        return text
    return tr("{names} (and {count} more)").format(names=text, count=len(names) - 4)


def _grouped(names: list[str], all_names: list[str]) -> list[str]:
    """``w_q.weight`` and ``w_q.bias`` both listed -> ``w_q``, when they are all of w_q."""
    out = []
    for name in names:
        prefix = name.rsplit(".", 1)[0] if "." in name else None
        siblings = [n for n in all_names if prefix and n.startswith(prefix + ".")]
        if prefix and siblings and all(n in names for n in siblings):
            if prefix not in out:
                out.append(prefix)
        else:
            out.append(name)
    return out


def _in_place_problem(prepared: Prepared, watch: Watch) -> str | None:
    changed = [
        n for n, (passed, before) in prepared.inputs.items() if changed_in_place(passed, before)
    ]
    if not changed:
        return None
    name = changed[0]
    passed = prepared.inputs[name][0]
    if not isinstance(passed, torch.Tensor):
        return tr(
            "it changes its argument {name} in place; leave it as it is and build a new one"
        ).format(name=name)
    storage = storage_of(passed)
    event = next((e for e in watch.in_place if e.storage == storage), None)
    if event is None:
        return tr("it changes the caller's {name} in place; leave the input as it is").format(
            name=name
        )
    return tr("it changes the caller's {name} in place ({event}); {remedy}").format(
        name=name, event=event, remedy=in_place_remedy(event, name)
    )


def _backward_problem(error: BaseException, watch: Watch) -> str:
    said = str(error).strip().splitlines()[0]
    fields = dict(kind=type(error).__name__, error=said)
    if "inplace" in said and watch.in_place:
        event = watch.in_place[0]
        fix = rewrite_in_place(event.line)
        if fix:
            return tr(
                "backward through it fails ({kind}: {error}): {event} changes in place a tensor "
                "that backward needs; write `{fix}` instead"
            ).format(event=event, fix=fix, **fields)
        return tr(
            "backward through it fails ({kind}: {error}): {event} changes in place a tensor "
            "that backward needs; build a new tensor instead"
        ).format(event=event, **fields)
    return tr("backward through it fails ({kind}: {error})").format(**fields)


def _gradient_problem(mine: Prepared, ref: Prepared, watch: Watch) -> str | None:
    missing, wrong, judged = [], [], []
    for name, leaf in ref.leaves.items():
        expected = leaf.grad
        # Within atol of zero, a gradient is rounding, not a signal: with one key (T = 1) the
        # softmax is 1 whatever q and k are, and w_q's gradient is 0 or 1e-9 by the CPU's kernels.
        if expected is None or not expected.abs().gt(_GRADIENT_TOLERANCE.atol).any():
            continue
        judged.append(name)
        got = mine.leaves[name].grad if name in mine.leaves else None
        if got is None or not got.abs().gt(0).any():
            missing.append(name)
            continue
        nan = got.isnan() & ~expected.isnan()
        if nan.any():
            first = tuple(nan.nonzero()[0].tolist())
            return tr(
                "backward gives NaN in the gradient of {name} at {count} positions (first at "
                "index {index}) although the result is right: in training one NaN reaches every "
                "weight at the next step; backward goes through an inf or a 0/0 there (an -inf "
                "minus -inf in a row where every key is hidden, say)"
            ).format(name=name, count=int(nan.sum()), index=first)
        gradient = tr("the gradient of {name}").format(name=name)
        problem = difference(got, expected, gradient, None, _GRADIENT_TOLERANCE)
        if problem is not None:
            wrong.append(problem)
    if missing:
        names = _grouped(missing, judged)  # w_k: its weight, when its bias's gradient is 0
        cause = _why(watch, tr(": is something detached or computed outside torch?"))
        if len(names) == 1:
            return tr("{names} gets no gradient{cause}").format(names=names[0], cause=cause)
        return tr("{names} get no gradient{cause}").format(names=_listed(names), cause=cause)
    if wrong:
        cause = _why(
            watch,
            tr(" (the result itself is right: is part of it detached or computed outside torch?)"),
        )
        return f"{wrong[0]}{cause}"
    return None


def _randomness(runner, answer, args, kwargs, first, watch: Watch, prepared: Prepared,
                gap: str) -> str:  # fmt: skip
    """Why the result in train mode differs (``gap``): random (dropout named), or not."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(1)
        again = runner.prepare(answer, *copies(args, kwargs)).thunk()
    random = difference(_plain(again), _plain(first), "a second run") is not None
    if not random:
        if runner.kind == "module":
            return tr(
                "in train mode (model.train(), as during training) the result differs from "
                "the eval-mode result, which was right: something in forward depends on "
                "self.training ({gap})"
            ).format(gap=gap)
        return tr("with gradients on, as in training, the result differs ({gap})").format(gap=gap)
    where = []
    if prepared.module is not None:
        where += [
            f"self.{n} = {type(m).__name__}(p={m.p})"
            for n, m in prepared.module.named_modules()
            if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and n
        ]
    where = where or [str(e) for e in watch.dropout]
    seen = f" ({', '.join(where[:2])})" if where else ""
    if runner.kind == "module":
        message = tr(
            "it is random in train mode: two runs with the same input and weights differ{seen}; "
            "the specification has no dropout: remove it ({gap})"
        )
    else:
        message = tr(
            "it is random with gradients on: two runs with the same input and weights "
            "differ{seen}; the specification has no dropout: remove it ({gap})"
        )
    return message.format(seen=seen, gap=gap)


def _case_problem(runner, answer, reference, args, kwargs, axes, tolerance) -> str | None:
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(0)
        ref = runner.prepare(reference, *copies(args, kwargs))
        expected = ref.thunk()
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(0)
        mine = runner.prepare(answer, *copies(args, kwargs))
        with Watch(devices=True, origins=mine.origins) as watch:
            try:
                got = mine.thunk()
            except NotImplementedError:
                raise
            except Exception as error:  # the learner's code may fail in any way
                return _training_error(error)
    problem = _in_place_problem(mine, watch)
    if problem is not None:
        return problem
    gap = difference(_plain(got), _plain(expected), "the result", axes, tolerance)
    if gap is not None:
        return _randomness(runner, answer, args, kwargs, got, watch, mine, gap)
    return _backward(mine, ref, got, expected, watch) or _devices(runner, args, watch, got)


def _training_error(error: BaseException) -> str:
    where = _at(traceback_line(error))
    if "numpy()" in str(error):
        return tr(
            "run with gradients on, as in training, your code calls .numpy(){where}: autograd "
            "cannot follow a computation in NumPy, so nothing before it would learn; write it "
            "with torch operations"
        ).format(where=where)
    said = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return tr("run as in training, your code raised {kind}{where}: {error}").format(
        kind=type(error).__name__, where=where, error=said
    )


def _backward(mine: Prepared, ref: Prepared, got, expected, watch: Watch) -> str | None:
    references = [t for t in _floats(expected) if t.requires_grad]
    if not references:
        return None
    outputs = _floats(got)
    if not any(t.requires_grad for t in outputs):
        cause = _why(watch, tr(": is something detached or computed outside torch?"))
        return tr(
            "no gradient flows back through it: the result does not require grad{cause}"
        ).format(cause=cause)
    _pull(references, references).backward()
    pull = _pull(outputs, references)
    try:
        pull.backward()
    except Exception as error:  # the learner's graph may fail in any way
        return _backward_problem(error, watch)
    return _gradient_problem(mine, ref, watch)


#: The cases the training stage runs: the first ones, which every checker orders to differ
#: (the running example, another size, an edge); the forward stage has run them all.
TRAINING_CASES = 4


def training_problem(runner, answer, reference, cases, names, axes, tolerance) -> str | None:
    """Stages 1-4 of the module docstring on the first :data:`TRAINING_CASES` cases: None, or
    the problem and its case."""
    for case in cases[:TRAINING_CASES]:
        problem = _case_problem(runner, answer, reference, case.args, case.kwargs, axes,
                                tolerance)  # fmt: skip
        if problem is not None:
            return tr("on {case}, {problem}").format(case=case.describe(names), problem=problem)
    return None


_OPERATORS = {"__add__": "+", "__radd__": "+", "__sub__": "-", "__rsub__": "-", "__mul__": "*",
              "__rmul__": "*", "__matmul__": "@", "__truediv__": "/", "__and__": "&",
              "__or__": "|", "__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">=",
              "__eq__": "=="}  # fmt: skip


def _device_message(runner, args, operation: str, source: Event) -> str:
    name = runner.input_name(args)
    head = tr(
        "{source} makes a tensor on the CPU, and `{op}` meets it with tensors on {name}'s "
        "device: on a GPU this stops with 'Expected all tensors to be on the same device'"
    ).format(source=source, op=_OPERATORS.get(operation, operation), name=name)
    if source.attribute:
        return tr(
            "{head}; register it: self.register_buffer('<name>', tensor, persistent=False)"
        ).format(head=head)
    if source.what in (".cpu()", ".to('cpu')"):
        return tr("{head}; leave it on {name}'s device").format(head=head, name=name)
    return tr(
        "{head}; create it there (device={name}.device) or move it there (.to({name}.device))"
    ).format(head=head, name=name)


def _devices(runner, args, watch: Watch, output) -> str | None:
    """A CPU tensor that met the caller's (``watch.mixed``), or that is returned."""
    if watch.mixed is not None:
        return _device_message(runner, args, *watch.mixed)
    for result in _ints(output):
        source = watch.origin(result)
        if source is not None and result.dim() > 0 and watch.origin(result) is not None:
            if any(isinstance(a, torch.Tensor) for a in args):
                name = runner.input_name(args)
                return tr(
                    "it returns a tensor made on the CPU by {source}, not on {name}'s device: "
                    "on a GPU the model's next step stops there; create it with "
                    "device={name}.device (or move it there: .to({name}.device))"
                ).format(source=source, name=name)
    return None


def device_problem(runner, answer, cases) -> str | None:
    """Stage 4 alone (for checkers without the training stage), on the first two cases that
    hold a tensor: None, or the problem and its case."""
    with_tensors = [
        c for c in cases if any(isinstance(a, (torch.Tensor, nn.Module)) for a in c.args)
    ]
    for case in with_tensors[:2]:
        args, kwargs = copies(case.args, case.kwargs)
        prepared = runner.prepare(answer, args, kwargs, grad=False)
        with Watch(devices=True, origins=prepared.origins) as watch:
            try:
                output = prepared.thunk()
            except Exception:  # the forward stage has judged what it raises
                continue
        problem = _devices(runner, args, watch, output)
        if problem is not None:
            return problem
    return None
