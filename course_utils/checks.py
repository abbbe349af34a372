"""Argument checks shared by the whole package, so that every misuse gets one kind of message:
the argument's name, what was expected, what was given, and the fix.

* :func:`check_int` / :func:`check_float` / :func:`check_choice`: counts, sizes, rates, names.
  :func:`as_number` is the type half of :func:`check_float`, for callers that word the range
  themselves. Integer and float scalars of numpy and one-element tensors count as numbers.
* :func:`check_bool`: a flag (``True`` / ``False``; a string such as ``"no"`` is refused).
* :func:`check_instance` / :func:`check_tensor`: an object of the expected class, e.g. a
  ``TrainConfig`` where a ``ModelConfig`` was passed, or a tensor where a numpy array was.
* :func:`check_text`: a ``str`` (``bytes`` is refused with the ``.decode("utf-8")`` fix).
* :func:`as_id_tensor`: token ids as an int64 tensor. Any integer dtype (``uint8``, ``uint16``
  from nanoGPT-style ``.bin`` memmaps, ``int32``, numpy arrays, Python lists) is converted to
  ``torch.long``; ``uint8`` is never read as a boolean mask. Floats and bools are refused.
* :func:`check_input_dtype` / :func:`check_last_axis`: the float input of a layer, in the
  weights' dtype (and, for a layer acting on channels, with the right last axis).
* :func:`check_dropout_p`: a dropout probability in ``[0, 1)``.
* :func:`check_float_dtype`: a floating ``torch.dtype`` for a table or a buffer.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch


def _describe(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_int(
    value: object, name: str, minimum: int | None = None, maximum: int | None = None, why: str = ""
) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[minimum, maximum]``.

    A float is refused even when it is whole (``1e3``): a count written as a float is usually
    a mistake, and the fix is one ``int(...)``. A bool is refused (``True`` is not a count).

    Raises:
        TypeError: not an integer (floats, bools, strings, tensors of more than one value).
        ValueError: below ``minimum`` or above ``maximum``.
    """
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        value = value.item() if value.dtype != torch.bool else value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        is_number = isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
        fix = f"; pass int({value!r})" if is_number or _is_numeric_text(value) else ""
        raise TypeError(f"{name} must be an int, got {_describe(value)}{fix}")
    value = int(value)
    reason = f" ({why})" if why else ""
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}{reason}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}{reason}, got {value}")
    return value


def check_float(
    value: object,
    name: str,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    why: str = "",
) -> float:
    """Return ``value`` as a ``float`` if it is a real number (ints too) in the given range.

    Raises:
        TypeError: not a real number (bools, strings, tensors of more than one value).
        ValueError: NaN, infinite where a bound is set, or outside the range.
    """
    value = as_number(value, name)
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    lower = "-inf" if low is None else f"{low:g}"
    upper = "inf" if high is None else f"{high:g}"
    interval = f"{left}{lower}, {upper}{right}"
    reason = f" ({why})" if why else ""
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if math.isnan(value) or too_low or too_high:
        raise ValueError(f"{name} must be in {interval}{reason}, got {value}")
    return value


def as_number(value: object, name: str) -> float:
    """Return ``value`` as a ``float`` if it is a real number (ints, numpy scalars and
    one-element tensors too); NaN and infinities pass: the caller words the range.

    Raises:
        TypeError: not a real number (bools, strings, tensors of more than one value).
    """
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        fix = f"; pass float({value!r})" if _is_numeric_text(value) else ""
        raise TypeError(f"{name} must be a number, got {_describe(value)}{fix}")
    return float(value)


def _is_numeric_text(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def check_bool(value: object, name: str) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (a numpy bool too).

    A string such as ``"no"`` or a number would be truthy or falsy without saying so.

    Raises:
        TypeError: anything else.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {_describe(value)}")


def check_instance(value: object, name: str, expected: type | tuple, fix: str = "") -> object:
    """Return ``value`` if it is an instance of ``expected``.

    Raises:
        TypeError: another type; the message names both classes and ``fix`` (for a model
            whose ``.config`` is what was expected: pass that).
    """
    if isinstance(value, expected):
        return value
    classes = expected if isinstance(expected, tuple) else (expected,)
    wanted = " or ".join(_TORCH_NAMES.get(c, c.__name__) for c in classes)
    article = "an" if wanted[0].lower() in "aeiou" else "a"
    if isinstance(getattr(value, "config", None), classes) and ".config" not in fix:
        model_fix = "that is a model, not its config: pass its .config (model.config)"
        fix = f"{model_fix}; {fix}" if fix else model_fix
    raise TypeError(
        f"{name} must be {article} {wanted}, got {type(value).__name__}"
        + (f"; {fix}" if fix else "")
    )


#: How messages name torch's classes (their __name__ alone, "Module", says little).
_TORCH_NAMES = {
    torch.nn.Module: "torch.nn.Module",
    torch.optim.Optimizer: "torch.optim.Optimizer",
    torch.Generator: "torch.Generator",
    torch.Tensor: "torch.Tensor",
}


def check_tensor(value: object, name: str, what: str = "") -> torch.Tensor:
    """Return ``value`` if it is a ``torch.Tensor``; ``what`` describes it, e.g. ``"float
    (B, T, C)"``.

    Raises:
        TypeError: a numpy array, a list or anything else, with the conversion.
    """
    if isinstance(value, torch.Tensor):
        return value
    described = f"a {what} torch.Tensor" if what else "a torch.Tensor"
    raise TypeError(
        f"{name} must be {described}, got {type(value).__name__}; convert it with "
        f"torch.as_tensor({name})"
    )


def _choice_fix(value: object, choices: tuple) -> str:
    """A hint for a value of the wrong type: the name it most likely stands for."""
    if isinstance(value, list | tuple | set) and len(value) == 1:
        (only,) = value
        if isinstance(only, str | int | float) and only in choices:
            return f"pass {only!r} itself, not a {type(value).__name__}"
    if isinstance(value, torch.dtype):
        name = str(value).removeprefix("torch.")
        if name in choices:
            return f"pass the name {name!r}, not the torch dtype"
    if isinstance(value, torch.nn.Module | type):
        cls = value if isinstance(value, type) else type(value)
        name = cls.__name__.lower()
        if name in choices:
            return f"pass the name {name!r}, not the {cls.__name__} module"
    return f"pass one of the names, e.g. {choices[0]!r}"


def _describe_choice(value: object) -> str:
    if isinstance(value, torch.nn.Module):
        return f"a {type(value).__name__} module"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return _describe(value)


def check_choice(value: object, name: str, choices: tuple) -> object:
    """Return ``value`` if it is one of ``choices``.

    Raises:
        TypeError: ``choices`` are names (str) and ``value`` is not a str (a list, a module, a
            torch dtype...); the message names the str it most likely stands for.
        ValueError: a value of the right type that is not one of ``choices``.
    """
    names_only = all(isinstance(choice, str) for choice in choices)
    if names_only and not isinstance(value, str):
        raise TypeError(
            f"{name} must be a name, one of {choices}, got {_describe_choice(value)}; "
            f"{_choice_fix(value, choices)}"
        )
    if not isinstance(value, str | int | float | type(None)) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {_describe(value)}")
    return value


def check_text(text: object, name: str = "text") -> str:
    """Return ``text`` if it is a ``str``.

    Raises:
        TypeError: ``bytes`` (fix: ``.decode("utf-8")``), a list of strings, ids, or anything else.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, bytes | bytearray):
        raise TypeError(
            f"{name} must be a str, got {type(text).__name__}; decode it first: "
            f'{name}.decode("utf-8")'
        )
    if isinstance(text, list | tuple) and text and all(isinstance(t, str) for t in text):
        raise TypeError(
            f"{name} must be one str, got a {type(text).__name__} of {len(text)} strings; "
            f'join them first ("".join(...)) or call once per string'
        )
    hint = "; to turn ids back into text use decode" if _looks_like_ids(text) else ""
    raise TypeError(f"{name} must be a str, got {type(text).__name__}{hint}")


def _looks_like_ids(value: object) -> bool:
    if isinstance(value, torch.Tensor | np.ndarray):
        return True
    return isinstance(value, list | tuple) and all(isinstance(v, numbers.Integral) for v in value)


def as_id_tensor(ids: object, name: str = "ids") -> torch.Tensor:
    """``ids`` as an int64 tensor (same shape; tensors keep their device).

    Accepts a tensor or numpy array of any integer dtype, or a (nested) list of ints.

    Raises:
        TypeError: bool, float or complex values; text; something that is not array-like.
    """
    if isinstance(ids, str | bytes):
        raise TypeError(
            f"{name} must be token ids, got {type(ids).__name__}; encode the text first "
            "(e.g. tokenizer.encode(text))"
        )
    if isinstance(ids, np.ndarray):
        ids = torch.from_numpy(np.asarray(ids, dtype=np.int64) if _np_integer(ids) else ids)
    elif not isinstance(ids, torch.Tensor):
        try:
            ids = torch.as_tensor(ids)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(
                f"{name} must be token ids (a tensor, numpy array or list of ints), got "
                f"{type(ids).__name__}: {error}"
            ) from None
        if ids.numel() == 0:
            ids = ids.long()  # an empty list has no dtype of its own: torch would say float
    if ids.dtype == torch.bool or ids.dtype.is_floating_point or ids.dtype.is_complex:
        raise TypeError(
            f"{name} must hold integer token ids, got dtype {ids.dtype}; convert whole-number "
            f"floats with {name}.long(), and pass ids, not a mask or probabilities"
        )
    return ids if ids.dtype == torch.long else ids.long()


def _np_integer(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.integer)


def as_id_list(ids: object, vocab_size: int, name: str = "ids") -> list[int]:
    """One sequence of ids as a list of ints in ``[0, vocab_size)``, for ``decode``.

    Accepts a list/tuple of ints, or a 1-D tensor / numpy array of an integer dtype. A ``(1, T)``
    batch of one row (what ``generate`` returns) is refused with the fix ``ids[0]``.

    Raises:
        TypeError: text, floats, bools, nested lists of another depth.
        ValueError: not one sequence (2-D and more), or an id outside ``[0, vocab_size)``.
    """
    if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
        ids = [ids]
    tensor = as_id_tensor(ids, name)
    if tensor.ndim != 1:
        fix = (
            f"pass {name}[0] (or {name}.squeeze(0))"
            if tensor.ndim == 2 and tensor.shape[0] == 1
            else f"decode one row at a time: [tok.decode(row) for row in {name}.tolist()]"
        )
        raise ValueError(
            f"{name} must be one sequence of ids (1-D), got shape {tuple(tensor.shape)}; {fix}"
        )
    values = tensor.tolist()
    bad = [i for i in values if not 0 <= i < vocab_size]
    if bad:
        raise ValueError(
            f"{name} must be in [0, {vocab_size}), got {bad[:5]} (vocab_size={vocab_size}); "
            "were they made by another tokenizer?"
        )
    return values


def as_device(device: object, name: str = "device") -> torch.device:
    """``device`` as a ``torch.device``, one that this machine has.

    Raises:
        ValueError: not a device name PyTorch knows (e.g. ``"gpu"``: use ``"cuda"``).
        RuntimeError: a CUDA or MPS device that this machine does not have (PyTorch would
            fail later, deep inside a copy or a load, with a message about drivers).
    """
    if not isinstance(device, torch.device):
        try:
            device = torch.device(device)
        except (RuntimeError, TypeError) as error:
            raise ValueError(
                f"{name} must be a torch.device or a name such as 'cpu', 'cuda', 'cuda:0' or "
                f"'mps', got {device!r} ({error}); course_utils.lab.device.get_device() picks the "
                "best one"
            ) from None
    _check_available(device, name)
    return device


def _check_available(device: torch.device, name: str) -> None:
    """RuntimeError for a CUDA or MPS device this machine does not have."""
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (device.index is not None and device.index >= count):
            raise RuntimeError(
                f"{name}={str(device)!r} was requested but this machine has {count} CUDA "
                "device(s); use 'cpu', or course_utils.lab.device.get_device() to pick what is here"
            )
    elif device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise RuntimeError(
                f"{name}={str(device)!r} was requested but MPS (Apple's GPU) is not available "
                "here; use 'cpu', or course_utils.lab.device.get_device() to pick what is here"
            )


def check_float_dtype(dtype: object, name: str = "dtype", why: str = "") -> torch.dtype:
    """``dtype`` if it is a floating ``torch.dtype`` (``torch.float32``, ...).

    Raises:
        TypeError: not a ``torch.dtype`` (a string such as ``"float32"``), or an integer or
            bool dtype; ``why`` says what would go wrong.
    """
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"{name} must be a torch.dtype such as torch.float32, got {dtype!r} "
            f"({type(dtype).__name__})"
        )
    if not dtype.is_floating_point:
        reason = f": {why}" if why else ""
        raise TypeError(
            f"{name} must be a floating dtype (torch.float32, torch.float64, ...), got "
            f"{dtype}{reason}"
        )
    return dtype


def check_last_axis(
    x: torch.Tensor, size: int, weight: torch.Tensor, owner: str, axis: str = "C"
) -> None:
    """The input of a layer that acts on each vector's channels (a norm, a feed-forward
    network): a float tensor ``(..., size)`` with the dtype of ``weight``.

    Raises:
        TypeError: as :func:`check_input_dtype`.
        ValueError: a 0-dimensional ``x`` (one number: no axis to act on), or a last axis
            other than ``size``, naming ``owner`` and both shapes.
    """
    check_tensor(x, "x", f"float (..., {axis}={size})")
    if x.ndim == 0:
        raise ValueError(
            f"{owner} expected x of shape (..., {axis}={size}): a vector of {size} channels "
            f"(or a batch of them), got a 0-dimensional tensor (shape (), one number); pass "
            f"the {size} channels of each token together, e.g. a (B, T, {size}) tensor"
        )
    if x.shape[-1] != size:
        raise ValueError(
            f"{owner} expected x of shape (..., {axis}={size}): a last axis of size {size}, "
            f"got shape {tuple(x.shape)}"
        )
    check_input_dtype(x, weight)


def check_input_dtype(x: torch.Tensor, weight: torch.Tensor, name: str = "x") -> None:
    """Raise a clear error unless ``x`` is a float tensor with the dtype of ``weight`` (under
    autocast, any float dtype: autocast converts it).

    Raises:
        TypeError: ``x`` is not a tensor (a numpy array, a list), not a float tensor, or its
            dtype differs from the weights'.
    """
    check_tensor(x, name, "float (B, T, C)")
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"{name} must hold float vectors (B, T, C), got dtype {x.dtype}; token ids go "
            "through the embedding first"
        )
    if x.dtype != weight.dtype and not torch.is_autocast_enabled(x.device.type):
        raise TypeError(
            f"{name} has dtype {x.dtype} but the weights are {weight.dtype}; convert one of "
            f"them, e.g. {name}.to({weight.dtype})"
        )


def check_dropout_p(dropout_p: float, name: str = "dropout_p") -> float:
    """``dropout_p`` as a float, if it is a probability in ``[0, 1)`` (numpy floats too).

    Raises:
        TypeError: not a real number (a bool, a string or a tensor of several values).
        ValueError: outside ``[0, 1)``, or NaN.
    """
    dropout_p = as_number(dropout_p, name)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(
            f"{name} must be a probability in [0, 1), got {dropout_p}; use e.g. 0.1 "
            "(and 0.0 at evaluation)"
        )
    return dropout_p
