"""Watch what a learner's code does while it runs: what a comparison of outputs cannot see.

:class:`Watch` is a :class:`torch.overrides.TorchFunctionMode` that lets every torch call run
as it is and notes, with the learner's line (:func:`learner_line`):

- the calls that run with autograd off (``torch.no_grad()``) or take a tensor out of autograd's
  graph (``.detach()``, ``.data``, ``.numpy()``, ``.tolist()``, ``.item()``);
- the in-place operations (``x += ...``, ``q.div_(...)``, ``x[...] = ...``), with their target;
- dropout that is on;
- with ``devices`` on, where each tensor made on the CPU inside the learner's code comes from
  (a factory such as ``torch.arange(T)`` or ``torch.ones(T, T)`` without ``device=``,
  ``.cpu()``, a plain tensor attribute named in ``origins``), and the first operation that
  meets one (with more than one value) beside a tensor on the caller's device (the inputs,
  the parameters, everything computed from them, a factory given ``device=``): on a GPU that
  operation stops with "Expected all tensors to be on the same device". The machine needs no
  second device for this: on the CPU the watch tells the two kinds apart by where each tensor
  came from. Indexing with a CPU index (``x[cpu_ids]``) and copies (``.to``) are allowed on a
  GPU, so they are not noted.

Watching never changes what the learner's code computes or raises.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode

from course_utils.lab.language import tr

__all__ = [
    "Event",
    "Watch",
    "in_place_remedy",
    "learner_line",
    "rewrite_in_place",
    "traceback_line",
]

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
_CHECKERS_DIR = os.path.dirname(os.path.abspath(__file__))
_SOLUTION = os.path.join(_CHECKERS_DIR, "solution_model.py")
_COURSE_DIR = os.path.dirname(_CHECKERS_DIR)  # course_utils/

_LEAVE_GRAPH = {
    "detach": ".detach()", "detach_": ".detach_()", "numpy": ".numpy()",
    "tolist": ".tolist()", "item": ".item()",
}  # fmt: skip
_DROPOUT = {"dropout", "dropout_", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"}
_DROPOUT |= {"dropout1d", "dropout2d", "dropout3d"}
_CROSS_DEVICE_ALLOWED = {"__getitem__", "__setitem__", "index", "index_put", "index_put_", "to"}
_CROSS_DEVICE_ALLOWED |= {"copy_", "type_as", "type", "cpu", "cuda", "__get__"}
_NOT_IN_PLACE = {"requires_grad_", "retain_grad", "share_memory_", "set_", "record_stream"}
_NOT_IN_PLACE |= {"__set__"}


def _kind(filename: str) -> str:
    """ "torch" (or the standard library), "checker" (the course's checking code), "course"
    (the course's own parts and modules, which the learner's code may call) or "learner"."""
    if filename.startswith("<frozen"):
        return "torch"
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(_TORCH_DIR) or path.startswith(_STDLIB_DIR):
        return "torch"
    if path.startswith(_CHECKERS_DIR) and path != _SOLUTION:
        return "checker"
    if path == _SOLUTION or path.startswith(_COURSE_DIR):
        return "course"
    return "learner"


def _describe(filename: str, lineno: int) -> str:
    text = linecache.getline(filename, lineno).strip()
    if text:
        return tr("line {lineno}: `{code}`").format(lineno=lineno, code=text)
    return tr("line {lineno}").format(lineno=lineno)


def learner_line(depth: int = 2, direct: bool = False) -> str | None:
    """Where the learner's code is now: ``line N: `code` `` of the innermost frame that is
    neither torch's nor the standard library's; None when the course's checking code comes
    first (the call did not come from the learner's code) or, with ``direct``, when the
    call came from inside torch (``nn.init`` in a module built by the learner, say)."""
    frame = sys._getframe(depth)
    while frame is not None:
        kind = _kind(frame.f_code.co_filename)
        if kind == "checker" or (direct and kind == "torch"):
            return None
        if kind == "learner":
            return _describe(frame.f_code.co_filename, frame.f_lineno)
        direct = direct and kind != "course"  # the course's code runs the learner's calls
        frame = frame.f_back
    return None


def traceback_line(error: BaseException) -> str | None:
    """The learner's line an exception came from (the innermost learner frame of its
    traceback), or None."""
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    for filename, lineno in reversed(frames):
        kind = _kind(filename)
        if kind == "checker":
            return None
        if kind == "learner":
            return _describe(filename, lineno)
    return None  # (the course's and torch's frames are passed over)


_AUGMENTED = re.compile(r"^(?P<target>[\w.]+)\s*(?P<op>//|[-+*/@%])=\s*(?P<rest>.+)$")
_METHOD = re.compile(r"(?P<object>[\w.]+)\.(?P<method>[a-z]\w*?)_\(")


def rewrite_in_place(line: str | None) -> str | None:
    """The out-of-place line to write instead of ``line`` (``line N: `code` ``): ``x += y`` ->
    ``x = x + y``, ``x.sub_(m)`` -> ``x = x.sub(m)``, ``c = x.sub_(m)`` -> ``c = x.sub(m)``;
    None when no rewrite is known (``x[i] = v``, say)."""
    if line is None or "`" not in line:
        return None
    code = _without_comment(line.split("`")[1])
    match = _AUGMENTED.match(code)
    if match:
        target = match["target"]
        return f"{target} = {target} {match['op']} {match['rest']}"
    match = _METHOD.search(code)
    if match:
        call = f"{match['object']}.{match['method']}("
        fixed = code[: match.start()] + call + code[match.end() :]
        bare = match.start() == 0 and not re.match(r"^[\w.]+\s*=", code)
        return f"{match['object']} = {fixed}" if bare else fixed
    return None


def in_place_remedy(event: Event, name: str) -> str:
    """What to do instead of ``event``, an in-place change of the caller's tensor ``name``, as
    one clause in the current language: the out-of-place line (:func:`rewrite_in_place`) where
    one is known, else copy it first."""
    fix = rewrite_in_place(event.line)
    if fix:
        return tr("write `{fix}` instead, which makes a new tensor").format(fix=fix)
    return tr("copy it first ({name} = {name}.clone()) or build a new tensor").format(name=name)


def _without_comment(code: str) -> str:
    """``code`` without a trailing ``# comment`` (a # inside quotes is kept)."""
    quote = None
    for i, char in enumerate(code):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#":
            return code[:i].rstrip()
    return code


class Event:
    """One thing the learner's code did: ``what`` (``".detach()"``, ``"div_"`` ...), ``line``
    (``line N: `code` `` or None) and, for an in-place operation, the ``storage`` it wrote;
    ``attribute``: a tensor made before the run, named in ``Watch(origins=...)``."""

    def __init__(
        self, what: str, line: str | None, storage: int | None = None, attribute: bool = False
    ) -> None:
        self.what, self.line, self.storage = what, line, storage
        self.attribute = attribute

    def __str__(self) -> str:
        return f"{self.what} ({self.line})" if self.line else self.what


def _tensors(value, depth: int = 3) -> Iterator[torch.Tensor]:
    """The tensors in ``value`` (arguments: a tuple of tensors, lists of them, ...)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth and isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item, depth - 1)
    elif depth and isinstance(value, dict):
        yield from _tensors(list(value.values()), depth - 1)


def storage_of(tensor: torch.Tensor) -> int | None:
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:  # a tensor without storage
        return None


class Watch(TorchFunctionMode):
    """Notes what the learner's code does (module docstring): ``no_grad`` (the first call with
    autograd off), ``left_graph`` (calls that leave autograd), ``in_place``, ``dropout`` and,
    with ``devices``, ``mixed``: (the operation, where its CPU tensor came from). ``origins``
    names tensors on the CPU made before the run (``{"self.mask, a plain ...": tensor}``)."""

    def __init__(self, devices: bool = False, origins: dict | None = None) -> None:
        super().__init__()
        self.devices = devices
        self.no_grad: Event | None = None
        self.left_graph: list[Event] = []
        self.in_place: list[Event] = []
        self.dropout: list[Event] = []
        self.mixed: tuple[str, Event] | None = None
        self._origin: dict[int, Event] = {}
        self._keep: list[torch.Tensor] = []  # alive, so that an id names one tensor
        for name, tensor in (origins or {}).items():
            self._mark(tensor, Event(name, None, attribute=True))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:  # before the call, which may raise
            self._before(func, args, kwargs)
        except Exception:  # noting never changes what the learner's code does
            pass
        out = func(*args, **kwargs)
        try:
            if self.devices:
                self._follow(func, args, kwargs, out)
        except Exception:
            pass
        return out

    def _mark(self, tensor: torch.Tensor, event: Event) -> None:
        self._keep.append(tensor)
        self._origin[id(tensor)] = event

    def origin(self, tensor) -> Event | None:
        """Where a tensor made on the CPU came from; None for one on the caller's device."""
        return self._origin.get(id(tensor))

    def _before(self, func, args, kwargs) -> None:
        name = getattr(func, "__name__", "")
        tensors = [*_tensors(args), *_tensors(kwargs)]
        if self.no_grad is None and tensors and not torch.is_grad_enabled() and name != "__get__":
            line = learner_line(3, direct=True)
            if name != "_set_grad_enabled" and line is not None:
                self.no_grad = Event("torch.no_grad()", line)
        if func is torch.Tensor.data.__get__ or name in _LEAVE_GRAPH:
            line = learner_line(3, direct=True)
            if line is not None:
                what = ".data" if name == "__get__" else _LEAVE_GRAPH[name]
                self.left_graph.append(Event(what, line))
        elif (name.endswith("_") and not name.startswith("_")) or name == "__setitem__":
            if name not in _NOT_IN_PLACE and tensors:
                self.in_place.append(Event(name, learner_line(3), storage_of(tensors[0])))
        if name in _DROPOUT and _dropout_is_on(args, kwargs):
            self.dropout.append(Event(f"{name} (p > 0, training=True)", learner_line(3)))
        if name == "scaled_dot_product_attention" and kwargs.get("dropout_p", 0.0) > 0:
            self.dropout.append(Event("dropout_p > 0", learner_line(3)))
        if self.devices and self.mixed is None and name not in _CROSS_DEVICE_ALLOWED:
            made_here = [t for t in tensors if self.origin(t) and t.dim() > 0]
            if made_here and any(self.origin(t) is None for t in tensors):
                self.mixed = (name, self.origin(made_here[0]))

    def _follow(self, func, args, kwargs, out) -> None:
        """Mark the results made on the CPU: by a factory without ``device=``, by ``.cpu()``,
        or from CPU tensors only."""
        name = getattr(func, "__name__", "")
        tensors = [*_tensors(args), *_tensors(kwargs)]
        if func is torch.Tensor.data.__set__ and len(args) == 2:  # param.data = moved (.to)
            if self.origin(args[1]) is None:
                self._origin.pop(id(args[0]), None)
            return
        if name == "cpu" or (name == "to" and _to_cpu(args[1:], kwargs)):
            source = Event(".cpu()" if name == "cpu" else ".to('cpu')", learner_line(3))
        elif name in ("cuda", "type_as", "type") or (name == "to" and _moves(args[1:], kwargs)):
            return  # moved to a device: there, as the caller's tensors
        elif not tensors:
            device = kwargs.get("device")
            if device is not None and not _is_cpu_text(device):
                return
            line = learner_line(3)
            source = Event(f"torch.{name}", line) if line else None
        else:
            origins = [self.origin(t) for t in tensors]
            source = origins[0] if all(origins) else None
        if source is not None:
            for result in _tensors(out):
                self._mark(result, source)


def _is_cpu_text(device) -> bool:
    """A device written out as the CPU ("cpu"), not taken from a tensor."""
    return isinstance(device, str) and device.split(":")[0] == "cpu"


def _moves(args, kwargs) -> bool:
    """``.to(...)`` given a device (or a tensor whose device it takes), not only a dtype."""
    given = [*args, kwargs.get("device"), kwargs.get("other")]
    return any(isinstance(a, (str, torch.device, torch.Tensor)) for a in given)


def _to_cpu(args, kwargs) -> bool:
    device = kwargs.get("device", args[0] if args else None)
    return _is_cpu_text(device)


def _dropout_is_on(args, kwargs) -> bool:
    p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
    training = args[2] if len(args) > 2 else kwargs.get("training", True)
    return bool(training) and float(p) > 0
