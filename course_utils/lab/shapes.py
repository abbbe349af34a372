"""A shape tracer: run a model once and list every submodule's output shape, via forward hooks."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from course_utils.checks import check_instance, check_int
from course_utils.lab.language import display_width, padded, tr


@dataclass
class ShapeRecord:
    """One submodule call: its qualified name, class, and input/output shapes."""

    name: str
    kind: str
    input_shape: tuple[int, ...] | None
    output_shape: tuple[int, ...] | None


def _first_shape(value) -> tuple[int, ...] | None:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (tuple, list)):
        for item in value:
            shape = _first_shape(item)
            if shape is not None:
                return shape
    return None


def trace_shapes(
    model: nn.Module, *args, max_depth: int | None = None, **kwargs
) -> list[ShapeRecord]:
    """Call ``model(*args, **kwargs)`` once and record each submodule's shapes, in call order.

    Args:
        model: any ``nn.Module``.
        max_depth: record only modules at most this many dots deep (``blocks.0.attention``
            is depth 2); None records all.

    Returns:
        A list of :class:`ShapeRecord`, in the order the submodules finished.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``, no input was given, or ``max_depth`` is
            not an int.
        ValueError: ``max_depth < 0``.
    """
    check_instance(model, "model", nn.Module, "pass the model itself, then its inputs")
    if not args and not kwargs:
        raise TypeError(
            f"trace_shapes needs the inputs to call {type(model).__name__} with, got none; "
            "e.g. trace_shapes(model, ids)"
        )
    if max_depth is not None:
        max_depth = check_int(max_depth, "max_depth", minimum=0, why="None records all")
    records: list[ShapeRecord] = []
    handles = []
    for name, module in model.named_modules():
        if not name or (max_depth is not None and name.count(".") > max_depth):
            continue

        def hook(module, inputs, output, name=name):
            records.append(
                ShapeRecord(name, type(module).__name__, _first_shape(inputs), _first_shape(output))
            )

        handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return records


def format_shape_table(records: list[ShapeRecord], axis_names: dict[str, int] | None = None) -> str:
    """The records as an aligned text table: name, class, input shape, output shape.

    Args:
        records: from :func:`trace_shapes`.
        axis_names: optional ``{name: size}``, e.g. ``{"B": 2, "T": 6, "C": 24}``; each shape
            is then written with its axis names, ``(B=2, T=6, C=24)``, as by :func:`name_axes`.

    Raises:
        TypeError: ``axis_names`` is not a dict (see :func:`name_axes`).
        ValueError: from :func:`name_axes` (two names share a size).
    """
    if axis_names is not None:
        name_axes((), axis_names)  # checked once, even when no record has a shape

    def show(shape: tuple[int, ...] | None) -> str:
        if shape is None or axis_names is None:
            return str(shape)
        return name_axes(shape, axis_names)

    rows = [(tr("module"), tr("type"), tr("input shape"), tr("output shape"))]
    rows += [(r.name, r.kind, show(r.input_shape), show(r.output_shape)) for r in records]
    widths = [max(display_width(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(map(padded, row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def named_shape(value: torch.Tensor | tuple[int, ...], axes: str) -> str:
    """A shape with its axis names, e.g. ``named_shape(scores, "B h T_q T_k")`` ->
    ``"(B=2, h=3, T_q=6, T_k=6)"``.

    Args:
        value: a tensor or numpy array (its ``.shape`` is named), or a shape itself: a
            ``torch.Size`` or a tuple of ints. A list is refused: ``[[1, 2, 3], [4, 5, 6]]``
            or the ids ``tok.encode("hello")`` are data, not a shape.
        axes: the axis names separated by spaces, one per dimension.

    Raises:
        TypeError: ``value`` is a list or another non-shape (fix: ``torch.tensor(value)`` or
            ``tensor.shape``); ``axes`` is not one str of names separated by spaces.
        ValueError: the number of names differs from the tensor's rank.
    """
    shape = _as_shape(value)
    if not isinstance(axes, str):
        fix = " (for a list of names: ' '.join(names))" if isinstance(axes, list | tuple) else ""
        raise TypeError(
            f"axes must be one str of axis names separated by spaces, e.g. 'B T C', got "
            f"{type(axes).__name__}{fix}"
        )
    names = axes.split()
    if len(names) != len(shape):
        raise ValueError(f"{len(names)} axis names {names} for a {len(shape)}-D shape {shape}")
    return "(" + ", ".join(f"{n}={s}" for n, s in zip(names, shape)) + ")"


def _as_shape(value: object) -> tuple[int, ...]:
    """The shape :func:`named_shape` names: ``value.shape`` of a tensor or array, or ``value``
    itself when it is a ``torch.Size`` / tuple of ints."""
    fix = "pass a tensor (torch.tensor(value)) or a shape (tensor.shape)"
    if isinstance(value, list):
        kind = (
            "a list of ints (data such as token ids, or a shape?)"
            if value and all(_is_int(v) for v in value)
            else "a list"
        )
        raise TypeError(
            f"value must be a tensor, numpy array, torch.Size or tuple of ints, got {kind} "
            f"{_preview(value)}; {fix}"
        )
    if isinstance(value, torch.Tensor | np.ndarray) or (
        hasattr(value, "shape") and not isinstance(value, tuple)
    ):
        value = value.shape
    if isinstance(value, tuple) and all(_is_int(v) for v in value):
        return tuple(int(v) for v in value)
    raise TypeError(
        f"value must be a tensor, numpy array, torch.Size or tuple of ints, got "
        f"{type(value).__name__} {_preview(value)}; {fix}"
    )


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def name_axes(shape: torch.Tensor | tuple[int, ...], axis_names: dict[str, int]) -> str:
    """A shape with each axis named by its size, e.g. ``(2, 6, 24)`` with
    ``{"B": 2, "T": 6, "C": 24}`` -> ``"(B=2, T=6, C=24)"``.

    This works only because the running example gives every axis its own size; a size with
    no name is written as a bare number.

    Raises:
        TypeError: ``axis_names`` is not a dict of name -> int size.
        ValueError: two names share a size (the shape would be ambiguous).
    """
    check_instance(axis_names, "axis_names", dict, 'e.g. {"B": 2, "T": 6, "C": 24}')
    by_size: dict[int, str] = {}
    for name, size in axis_names.items():
        size = check_int(size, f"axis_names[{name!r}]")
        if size in by_size:
            raise ValueError(
                f"axes {by_size[size]!r} and {name!r} both have size {size}; naming axes by "
                "size needs every size to be different"
            )
        by_size[size] = name
    shape = tuple(shape.shape) if isinstance(shape, torch.Tensor) else tuple(shape)
    parts = [f"{by_size[s]}={s}" if s in by_size else str(s) for s in shape]
    return "(" + ", ".join(parts) + ")"
