"""Checkers for the notebooks' exercises, and a helper for cells that must raise.

A checker calls the student's function on fixed inputs, compares the result with a
reference, and prints one clear line: a tick when it matches, otherwise what differs (the
type, the shape, or the largest deviation and where it is). Checkers never raise on a wrong
answer, so a notebook with an unfinished exercise still runs to the end; they return
``True`` or ``False``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator

import torch


def compare(answer, expected: torch.Tensor, name: str = "answer", atol: float = 1e-5) -> str | None:
    """Why ``answer`` differs from ``expected``, or None when they match.

    Checks, in order: that ``answer`` is a tensor, its shape, its dtype kind (float vs
    integer vs bool), NaNs, then values to ``atol`` (absolute) and 1e-5 relative tolerance.
    """
    if not isinstance(answer, torch.Tensor):
        return f"{name} should be a torch.Tensor, got {type(answer).__name__}"
    if answer.shape != expected.shape:
        return f"{name} has shape {tuple(answer.shape)}, expected {tuple(expected.shape)}"
    if answer.dtype.is_floating_point != expected.dtype.is_floating_point or (
        (answer.dtype == torch.bool) != (expected.dtype == torch.bool)
    ):
        return f"{name} has dtype {answer.dtype}, expected {expected.dtype}"
    if expected.dtype == torch.bool or not expected.dtype.is_floating_point:
        wrong = (answer != expected).nonzero()
        if len(wrong):
            index = tuple(wrong[0].tolist())
            return (
                f"{name} differs at {len(wrong)} positions, first at index {index}: "
                f"{answer[index].item()} instead of {expected[index].item()}"
            )
        return None
    answer, expected = answer.detach().double().cpu(), expected.detach().double().cpu()
    if torch.isnan(answer).any() and not torch.isnan(expected).any():
        return f"{name} contains NaN at {tuple(torch.isnan(answer).nonzero()[0].tolist())}"
    if not torch.allclose(answer, expected, atol=atol, rtol=1e-5, equal_nan=True):
        deviation = (answer - expected).abs().nan_to_num(0.0)
        index = tuple(int(i) for i in torch.unravel_index(deviation.argmax(), deviation.shape))
        return (
            f"{name} differs by up to {deviation.max().item():.3g} (at index {index}: "
            f"{answer[index].item():.6g} instead of {expected[index].item():.6g})"
        )
    return None


def run_check(title: str, attempt: Callable[[], str | None]) -> bool:
    """Run ``attempt`` (which returns None when right, else a reason) and print the verdict.

    An exception raised inside the student's code is reported, not propagated.
    """
    try:
        problem = attempt()
    except NotImplementedError:
        problem = "not implemented yet"
    except Exception as error:  # the student's code may fail in any way
        problem = f"raised {type(error).__name__}: {error}"
    if problem is None:
        print(f"✅ {title}: correct")
        return True
    print(f"❌ {title}: {problem}")
    return False


@contextlib.contextmanager
def expect_error(exception: type[BaseException], match: str | None = None) -> Iterator[None]:
    """Context manager for a cell that must raise: prints the message, and fails if nothing
    (or something else) is raised.

    nbval's ``NBVAL_RAISES_EXCEPTION`` marker passes even when nothing is raised; this does not.

    Raises:
        AssertionError: nothing was raised, or the message does not match ``match``.
    """
    try:
        yield
    except exception as error:
        if match is not None and not re.search(match, str(error)):
            raise AssertionError(
                f"{type(error).__name__} raised, but {str(error)!r} does not match {match!r}"
            ) from error
        print(f"{type(error).__name__} raised, as expected: {error}")
    else:
        raise AssertionError(f"expected {exception.__name__}, but nothing was raised")


# ---------------------------------------------------------------------------------------
# Stage checkers. Each takes the student's function and returns True when it is right.
# ---------------------------------------------------------------------------------------


# --- notebook 01: tokenization ---


def check_count_pairs(count_pairs: Callable) -> bool:
    """Check ``count_pairs(ids)``: how often each pair of adjacent ids occurs, as a dict
    ``{(left, right): count}`` (a ``Counter`` is fine). This is the statistic BPE training
    maximises (Sennrich et al. 2016, §3.2).

    Cases include ``[5, 5, 5]``, where the pair ``(5, 5)`` occurs twice (pairs overlap), and
    sequences of length 1 and 0 (no pairs). Says when the pairs were taken two by two or the
    last pair was missed.
    """
    cases = [[1, 2, 3, 1, 2], [5, 5, 5], [104, 101, 108, 108, 111, 32, 104, 101], [7], []]

    def attempt() -> str | None:
        for ids in cases:
            expected: dict[tuple[int, int], int] = {}
            for pair in zip(ids, ids[1:]):
                expected[pair] = expected.get(pair, 0) + 1
            answer = count_pairs(list(ids))
            call = f"count_pairs({ids})"
            if not isinstance(answer, dict):
                kind = type(answer).__name__
                return f"{call} should return a dict {{(left, right): count}}, got {kind}"
            answer = {pair: count for pair, count in answer.items() if count != 0}
            if answer == expected:
                continue
            two_by_two: dict[tuple[int, int], int] = {}
            for pair in zip(ids[::2], ids[1::2]):
                two_by_two[pair] = two_by_two.get(pair, 0) + 1
            hint = ""
            if answer == two_by_two:
                hint = "; pairs overlap: [a, b, c] holds (a, b) and (b, c), so step by one"
            elif len(ids) > 1 and sum(answer.values()) == len(ids) - 2:
                hint = "; the last pair is missing (there are len(ids) - 1 pairs)"
            return f"{call} returned {answer}, expected {expected}{hint}"
        return None

    return run_check("count_pairs", attempt)


def check_merge_pair(merge_pair: Callable) -> bool:
    """Check ``merge_pair(ids, pair, new_id)``: a new list where each occurrence of ``pair``
    is replaced by ``new_id``, scanning left to right; the one step BPE repeats.

    Cases: two occurrences, an overlapping run ``[1, 1, 1]`` with the pair ``(1, 1)`` (the
    answer is ``[new_id, 1]``), a pair at the very end, no occurrence, an empty list. The
    input list must not change. Says when the last id is dropped.
    """
    from course_utils.tokenization import merge_pair as reference

    cases = [
        ([5, 6, 5, 6, 7], (5, 6), 256),
        ([1, 1, 1], (1, 1), 300),
        ([4, 1, 2], (1, 2), 257),
        ([1, 2, 3], (3, 4), 258),
        ([], (1, 2), 259),
    ]

    def attempt() -> str | None:
        for ids, pair, new_id in cases:
            given = list(ids)
            answer = merge_pair(given, pair, new_id)
            expected = reference(ids, pair, new_id)
            call = f"merge_pair({ids}, {pair}, {new_id})"
            if given != ids:
                return f"{call} changed its input list to {given}; build a new list"
            if not isinstance(answer, list):
                return f"{call} should return a list, got {type(answer).__name__}"
            if answer == expected:
                continue
            hint = ""
            if answer == expected[:-1]:
                hint = "; the last id is missing: a lone last id must be copied too"
            elif ids == [1, 1, 1]:
                hint = "; scan left to right and, after a merge, skip both ids of the pair"
            return f"{call} returned {answer}, expected {expected}{hint}"
        return None

    return run_check("merge_pair", attempt)


def check_join_documents(join_documents: Callable) -> bool:
    """Check ``join_documents(encoding, documents)``: the ids of each document, each followed
    by the special token ``<|endoftext|>`` (``encoding.eot_token``), as GPT-2-style training
    data is laid out.

    Tried with tiktoken's ``cl100k_base`` and ``o200k_base`` (different end-of-text ids), on
    documents in English and Chinese, one of which contains the *text* ``<|endoftext|>``: a
    document's text must never turn into the special token (encode documents as ordinary
    text). Says when the separator came out as ordinary text or was hard-coded.
    """
    from course_utils.tokenization import load_encoding

    documents = ["Hello world.", "我爱北京天安门", "Write <|endoftext|> to end a text."]

    def attempt() -> str | None:
        for name in ("cl100k_base", "o200k_base"):
            encoding = load_encoding(name)
            expected = []
            for document in documents:
                expected += encoding.encode_ordinary(document) + [encoding.eot_token]
            answer = join_documents(encoding, list(documents))
            call = f"join_documents({name}, documents)"
            if not isinstance(answer, list):
                return f"{call} should return a list of ids, got {type(answer).__name__}"
            if answer == expected:
                continue
            text = "".join(d + "<|endoftext|>" for d in documents)
            if answer == encoding.encode_ordinary(text):
                return (
                    f"{call}: <|endoftext|> came out as ordinary text tokens; append the "
                    "special id encoding.eot_token instead"
                )
            if answer == encoding.encode(text, allowed_special="all"):
                return (
                    f"{call}: the text '<|endoftext|>' inside a document became the special "
                    "token; encode each document with encode_ordinary"
                )
            if encoding.eot_token not in answer and 100257 in answer:
                return f"{call} uses id 100257; take the id from encoding.eot_token"
            return f"{call} returned {len(answer)} ids, expected {len(expected)}: {expected}"
        return None

    return run_check("join_documents", attempt)


# --- notebook 02: embeddings ---
def _embedding_case() -> tuple[torch.Tensor, torch.Tensor]:
    """ids (B=2, T=5) and a table W (V=10, d_model=7). The largest id is 8 < V - 1, so a
    one-hot without ``num_classes`` comes out one column short."""
    ids = torch.tensor([[1, 4, 4, 0, 7], [3, 3, 8, 2, 5]])
    weight = torch.randn(10, 7, generator=torch.Generator().manual_seed(2))
    return ids, weight


def check_one_hot_lookup(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> bool:
    """Check ``fn(ids, weight)``: the embedding lookup written as ``one_hot(ids) @ weight``.

    ``ids`` is ``(B, T)`` int64, ``weight`` is ``(V, d_model)``; the answer must be
    ``(B, T, d_model)`` and equal ``weight[ids]`` (Vaswani et al. 2017, §3.4).
    """

    def attempt() -> str | None:
        ids, weight = _embedding_case()
        return compare(fn(ids, weight), weight[ids], name="one_hot(ids) @ W")

    return run_check("embedding lookup as one_hot @ W", attempt)


def check_scaled_embedding(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> bool:
    """Check ``fn(ids, weight)``: the paper's token embedding ``weight[ids] * sqrt(d_model)``.

    ``d_model`` is ``weight.shape[1]`` (here 7, not the notebook's 24, so a hard-coded
    constant is caught). A wrong scale gets a hint: none, ``d_model`` (scaled twice), or
    ``sqrt(vocab_size)``.
    """

    def attempt() -> str | None:
        import math

        ids, weight = _embedding_case()
        vocab_size, d_model = weight.shape
        answer = fn(ids, weight)
        problem = compare(answer, weight[ids] * math.sqrt(d_model), name="scaled embedding")
        if problem is None or not isinstance(answer, torch.Tensor):
            return problem
        hints = {
            1.0: "it looks unscaled: multiply by sqrt(d_model)",
            float(d_model): "it looks scaled by d_model: was sqrt(d_model) applied twice?",
            math.sqrt(vocab_size): "it looks scaled by sqrt(vocab_size); d_model = weight.shape[1]",
        }
        for factor, hint in hints.items():
            if answer.shape == ids.shape + (d_model,) and torch.allclose(
                answer.detach().double(), weight[ids].double() * factor, atol=1e-5
            ):
                return f"{problem}; {hint}"
        return problem

    return run_check("scaled token embedding", attempt)


# --- notebook 03: positional encoding ---
def check_sinusoidal_table(fn: Callable[[int, int], torch.Tensor]) -> bool:
    """Check ``fn(max_len, d_model)``: the sinusoidal table of Vaswani et al. 2017, §3.5.

    The answer must be ``(max_len, d_model)`` with ``PE[pos, 2i] = sin(pos / 10000^(2i/d))``
    and ``PE[pos, 2i+1] = cos(...)``. Two sizes are tried, (50, 24) and (7, 10).
    """

    def attempt() -> str | None:
        from course_utils.positional import sinusoidal_positional_encoding

        for max_len, d_model in [(50, 24), (7, 10)]:
            expected = sinusoidal_positional_encoding(max_len, d_model, dtype=torch.float64)
            problem = compare(fn(max_len, d_model), expected, name=f"PE({max_len}, {d_model})")
            if problem is not None:
                return (
                    f"{problem}; channel 2i is sin, 2i+1 is cos, and the exponent 2i/d_model "
                    "uses the pair index i = channel // 2"
                )
        return None

    return run_check("sinusoidal positional encoding table", attempt)


def check_pe_shift_matrix(fn: Callable[[int, int], torch.Tensor]) -> bool:
    """Check ``fn(k, d_model)``: the ``(d_model, d_model)`` matrix ``M(k)`` with
    ``PE[pos + k] = M(k) @ PE[pos]`` (Vaswani et al. 2017, §3.5).

    Compared with :func:`course_utils.positional.pe_shift_matrix` for k = 3 (d_model 24) and
    k = -2 (d_model 10). A transposed answer (the rotation by -k) gets a hint.
    """

    def attempt() -> str | None:
        from course_utils.positional import pe_shift_matrix

        for k, d_model in [(3, 24), (-2, 10)]:
            expected = pe_shift_matrix(k, d_model)
            answer = fn(k, d_model)
            problem = compare(answer, expected, name=f"M({k}) for d_model={d_model}")
            if problem is None:
                continue
            if compare(answer, expected.T) is None:
                return f"{problem}; your matrix is M(-k), the transpose: check the signs of sin"
            return problem
        return None

    return run_check("shift matrix M(k)", attempt)


# --- notebook 04: Q, K, V and heads ---


def _randn_04(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check_split_heads(split_heads: Callable) -> bool:
    """Exercise 04.1: ``split_heads(x, n_heads)`` maps ``(B, T, C)`` to ``(B, h, T, d_k)``,
    head ``i`` holding channels ``i*d_k .. (i+1)*d_k - 1`` of every position (§3.2.2).

    Tried on the running example (2, 6, 24) with h=3 and on (3, 5, 12) with h=4.
    """

    def attempt() -> str | None:
        for (batch, time, channels, heads), seed in (((2, 6, 24, 3), 40), ((3, 5, 12, 4), 41)):
            x = _randn_04(batch, time, channels, seed=seed)
            d_k = channels // heads
            expected = x.view(batch, time, heads, d_k).transpose(1, 2)
            answer = split_heads(x.clone(), heads)
            name = f"split_heads(x of shape {(batch, time, channels)}, n_heads={heads})"
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
                if torch.equal(answer, x.view(batch, heads, time, d_k)):
                    return (
                        f"{name} equals x.view(B, h, T, d_k): that mixes positions and "
                        "channels; view as (B, T, h, d_k) first, then swap the T and h axes"
                    )
            problem = compare(answer, expected, name)
            if problem:
                return problem
        return None

    return run_check("split_heads", attempt)


def check_head_queries(head_queries: Callable) -> bool:
    """Exercise 04.2: ``head_queries(x, W_q, head, n_heads)`` is head ``head``'s queries,
    ``(B, T, d_k)``, computed as ``x @ W_i^Q`` with ``W_i^Q`` the ``(C, d_k)`` block of
    columns of ``W_q`` (paper orientation, ``(C, C)``; §3.2.2).

    Every head of the running example (C=24, h=3) and of C=12, h=4 is tried.
    """

    def attempt() -> str | None:
        for (batch, time, channels, heads), seed in (((2, 6, 24, 3), 42), ((1, 5, 12, 4), 43)):
            x = _randn_04(batch, time, channels, seed=seed)
            w_q = _randn_04(channels, channels, seed=seed + 100)
            d_k = channels // heads
            for head in range(heads):
                expected = x @ w_q[:, head * d_k : (head + 1) * d_k]
                answer = head_queries(x.clone(), w_q.clone(), head, heads)
                name = f"head_queries(..., head={head}, n_heads={heads}) with C={channels}"
                problem = compare(answer, expected, name, atol=1e-4)
                if problem:
                    return problem
        return None

    return run_check("head_queries", attempt)


# --- notebook 05: scores and scaling ---


def check_scaled_scores(scaled_scores: Callable) -> bool:
    """Exercise 05.1: ``scaled_scores(q, k)`` is ``q @ k^T / sqrt(d_k)`` (§3.2.1, Eq. 1).

    Shapes: q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)`` -> ``(..., T_q, T_k)``. Tried with
    T_q, T_k and d_k all different, so a transposed product cannot pass.
    """

    def attempt() -> str | None:
        generator = torch.Generator().manual_seed(50)
        for q_shape, k_shape in (((2, 3, 6, 8), (2, 3, 5, 8)), ((4, 16), (7, 16))):
            q = torch.randn(*q_shape, generator=generator)
            k = torch.randn(*k_shape, generator=generator)
            raw = q @ k.transpose(-2, -1)
            d_k = q.shape[-1]
            answer = scaled_scores(q.clone(), k.clone())
            name = f"scaled_scores(q {q_shape}, k {k_shape})"
            if isinstance(answer, torch.Tensor) and answer.shape == raw.shape:
                if torch.allclose(answer, raw, atol=1e-5):
                    return f"{name} is q @ k^T without the 1/sqrt(d_k) scale"
                if torch.allclose(answer, raw / d_k, atol=1e-5):
                    return f"{name} divides by d_k = {d_k}; divide by sqrt(d_k) = {d_k**0.5:g}"
            problem = compare(answer, raw / d_k**0.5, name)
            if problem:
                return problem
        return None

    return run_check("scaled_scores", attempt)


def check_softmax_jacobian(softmax_jacobian: Callable) -> bool:
    """Exercise 05.2: ``softmax_jacobian(p)`` for ``p = softmax(s)`` of shape ``(T,)`` is the
    ``(T, T)`` matrix ``J[i, j] = d p_i / d s_j``, compared with autograd's Jacobian.

    Tried on a spread-out and on a nearly one-hot (saturated) distribution.
    """

    def attempt() -> str | None:
        for scores in (
            torch.tensor([0.5, -1.0, 2.0, 0.0, 1.0]),
            torch.tensor([12.0, 0.0, 3.0, -2.0]),
        ):
            p = torch.softmax(scores, dim=-1)
            expected = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), scores)
            answer = softmax_jacobian(p.clone())
            problem = compare(answer, expected, f"softmax_jacobian(p of length {len(p)})")
            if problem:
                return problem
        return None

    return run_check("softmax_jacobian", attempt)


# --- notebook 06: masking ---


def check_causal_mask(causal_mask: Callable) -> bool:
    """Exercise 06.1: ``causal_mask(T)`` is a ``(T, T)`` torch.bool mask, True where query t
    may attend to key s, i.e. ``s <= t`` (itself included; §3.2.3)."""

    def attempt() -> str | None:
        for size in (4, 6, 1):
            positions = torch.arange(size)
            expected = positions[None, :] <= positions[:, None]
            answer = causal_mask(size)
            name = f"causal_mask({size})"
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
                if torch.equal(answer, expected.T) and not torch.equal(answer, expected):
                    return f"{name} is the upper triangle: query t would see the future"
            problem = compare(answer, expected, name)
            if problem:
                return problem
        return None

    return run_check("causal_mask", attempt)


def check_padding_mask(padding_mask: Callable) -> bool:
    """Exercise 06.2: ``padding_mask(lengths, T)`` is a ``(B, 1, 1, T)`` torch.bool key mask,
    True at the real tokens ``j < lengths[b]`` of right-padded sequences."""

    def attempt() -> str | None:
        for lengths, size in (([6, 4], 6), ([3, 1, 4, 0], 4)):
            expected = (torch.arange(size)[None, :] < torch.tensor(lengths)[:, None])[
                :, None, None, :
            ]
            answer = padding_mask(list(lengths), size)
            name = f"padding_mask({lengths}, {size})"
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape[::3]:
                return (
                    f"{name} has shape {tuple(answer.shape)} (B, T); add two singleton axes "
                    "for heads and queries: (B, 1, 1, T)"
                )
            problem = compare(answer, expected, name)
            if problem:
                return problem
        return None

    return run_check("padding_mask", attempt)


def check_masked_softmax(masked_softmax: Callable) -> bool:
    """Exercise 06.3: ``masked_softmax(scores, mask)`` is the softmax over the last axis (key
    positions) with hidden keys (``mask == False``) getting weight 0, and a query whose keys
    are all hidden getting an all-zero row, never NaN or a uniform row.

    Shapes: scores ``(B, h, T_q, T_k)`` float, mask bool broadcastable to it.
    """

    def attempt() -> str | None:
        scores = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(60))
        keep = (torch.arange(6)[None, :] >= torch.tensor([0, 2])[:, None])[:, None, None, :]
        mask = torch.ones(6, 6, dtype=torch.bool).tril() & keep  # rows 0, 1 of item 1: empty
        expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        expected = expected.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        answer = masked_softmax(scores.clone(), mask.clone())
        name = "masked_softmax(scores (2, 3, 6, 6), causal & left-padding mask)"
        if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
            if torch.isnan(answer).any():
                return (
                    f"{name} has NaN in the fully masked rows (softmax of all -inf); "
                    "set the rows with no visible key to 0"
                )
            if torch.allclose(answer[1, :, 0], torch.full((3, 6), 1 / 6), atol=1e-4):
                return (
                    f"{name}: a fully masked row is uniform (1/T on hidden keys), as with a "
                    "large negative fill; it must be all zeros"
                )
        return compare(answer, expected, name)

    return run_check("masked_softmax", attempt)


# --- notebook 07: softmax and weighted values ---


def check_stable_softmax(stable_softmax: Callable) -> bool:
    """Check ``stable_softmax(scores, temperature=1.0)``: softmax(scores / temperature) over
    the last axis (the key positions), computed without overflow (§3.2.1).

    Cases: random scores ``(2, 3, 4, 5)`` (T_q=4 differs from T_k=5, so a softmax over the
    wrong axis shows), temperatures 0.5 and 2, and float32 rows ``[100, 400, 700, 1000]``
    (``exp`` overflows to inf without the max-subtraction) and ``[1, 2, 3, 4]`` (subtracting
    one global maximum instead of each row's own underflows that row to 0 / 0).
    """

    def attempt() -> str | None:
        scores = 3 * torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(7))
        problem = compare(
            stable_softmax(scores.clone()), torch.softmax(scores, dim=-1), "stable_softmax(scores)"
        )
        if problem:
            return problem
        for temperature in (0.5, 2.0):
            problem = compare(
                stable_softmax(scores.clone(), temperature=temperature),
                torch.softmax(scores / temperature, dim=-1),
                f"stable_softmax(scores, temperature={temperature})",
            )
            if problem:
                return problem + " (divide the scores by the temperature before the softmax)"
        large = torch.tensor([[100.0, 400.0, 700.0, 1000.0], [1.0, 2.0, 3.0, 4.0]])
        problem = compare(
            stable_softmax(large.clone()),
            torch.softmax(large, dim=-1),
            "stable_softmax([[100, 400, 700, 1000], [1, 2, 3, 4]])",
        )
        if problem:
            return problem + "; subtract each row's own maximum (keepdim=True) before exp"
        return None

    return run_check("stable softmax", attempt)


def check_attention_output(attention: Callable) -> bool:
    """Check ``attention(q, k, v)`` -> ``(output, weights)``, Eq. 1 of §3.2.1:
    ``weights = softmax(q k^T / sqrt(d_k))`` over the keys, ``output = weights @ v``.

    Uses q ``(2, 3, 4, 8)``, k ``(2, 3, 5, 8)``, v ``(2, 3, 5, 6)``: T_q=4, T_k=5, d_k=8 and
    d_v=6 all differ, so a softmax over the wrong axis, a missing scale or a product in the
    wrong order is caught.
    """

    def attempt() -> str | None:
        generator = torch.Generator().manual_seed(8)
        shapes = ((4, 8), (5, 8), (5, 6))  # (T_q, d_k), (T_k, d_k), (T_k, d_v)
        q, k, v = (torch.randn(2, 3, t, d, generator=generator) for t, d in shapes)
        weights = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)  # (B, h, T_q, T_k)
        result = attention(q.clone(), k.clone(), v.clone())
        if not (isinstance(result, tuple) and len(result) == 2):
            return f"attention should return a tuple (output, weights), got {type(result).__name__}"
        return compare(result[1], weights, "weights") or compare(result[0], weights @ v, "output")

    return run_check("attention output", attempt)


# --- notebook 08: concat and W_o ---


def check_merge_heads(merge_heads: Callable) -> bool:
    """Check ``merge_heads(x)``: ``(B, h, T, d_k)`` -> ``(B, T, h * d_k)``, where row t holds
    head 0's vector of token t, then head 1's, ... (the Concat of §3.2.2).

    Uses x ``(2, 3, 5, 4)`` (B, h, T, d_k all different), so a ``view`` without the transpose
    (right shape, scrambled values) is caught.
    """

    def attempt() -> str | None:
        x = torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(9))
        expected = torch.cat(x.unbind(dim=1), dim=-1)  # Concat(head_1, ..., head_h): (B, T, C)
        return compare(merge_heads(x.clone()), expected, "merge_heads(x)")

    return run_check("merge heads", attempt)


def check_multi_head_attention(multi_head_attention: Callable) -> bool:
    """Check ``multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, causal=False)``, the
    whole of §3.2.2: ``(B, T, C)`` -> ``(B, T, C)``.

    The four weights are ``(C, C)`` in ``nn.Linear`` layout (``y = x @ w.T``) without biases.
    Uses B=2, T=5, C=12, h=3 (d_k=4), with and without the causal mask, against a reference
    built on ``F.scaled_dot_product_attention``.
    """

    def attempt() -> str | None:
        generator = torch.Generator().manual_seed(10)
        batch, time, channels, heads = 2, 5, 12, 3
        x = torch.randn(batch, time, channels, generator=generator)
        w_q, w_k, w_v, w_o = (
            torch.randn(channels, channels, generator=generator) / channels**0.5 for _ in range(4)
        )

        def split(t: torch.Tensor) -> torch.Tensor:  # (B, T, C) -> (B, h, T, d_k)
            return t.view(batch, time, heads, channels // heads).transpose(1, 2)

        for causal in (False, True):
            out = torch.nn.functional.scaled_dot_product_attention(
                split(x @ w_q.T), split(x @ w_k.T), split(x @ w_v.T), is_causal=causal
            )  # (B, h, T, d_k)
            expected = out.transpose(1, 2).reshape(batch, time, channels) @ w_o.T  # (B, T, C)
            answer = multi_head_attention(x.clone(), w_q, w_k, w_v, w_o, heads, causal=causal)
            problem = compare(answer, expected, f"output with causal={causal}")
            if problem:
                return problem
        return None

    return run_check("multi-head attention", attempt)


# --- notebook 09: residual and LayerNorm ---


def _nb09_layer_norm_mistakes() -> dict[str, Callable]:
    """The classic hand-written LayerNorms, by the hint that names each."""

    def centred(x):
        return x - x.mean(dim=-1, keepdim=True)

    def biased_var(x):
        return x.var(dim=-1, keepdim=True, unbiased=False)

    def unbiased_var(x):
        return x.var(dim=-1, keepdim=True, unbiased=True)

    def std_eps_outside(x, w, b, e):
        return centred(x) / (unbiased_var(x).sqrt() + e) * w + b

    def unbiased(x, w, b, e):
        return centred(x) / torch.sqrt(unbiased_var(x) + e) * w + b

    def eps_outside(x, w, b, e):
        return centred(x) / (biased_var(x).sqrt() + e) * w + b

    def no_affine(x, w, b, e):
        return centred(x) / torch.sqrt(biased_var(x) + e)

    return {
        "x.std() (unbiased) with eps outside the square root (design mistake 3)": std_eps_outside,
        "the unbiased variance (divide by C - 1); LayerNorm divides by C: "
        "use x.var(dim=-1, unbiased=False)": unbiased,
        "eps added outside the square root; it belongs inside: sqrt(var + eps)": eps_outside,
        "a right normalisation, but weight and bias were not applied": no_affine,
    }


def check_layer_norm(layer_norm: Callable) -> bool:
    """Check ``layer_norm(x, weight, bias, eps)``: LayerNorm over the last axis, by hand.

    Compared with ``torch.nn.functional.layer_norm`` on a ``(B, T, C) = (2, 6, 24)`` batch
    with a scale and shift, on ``C = 4`` (where the unbiased variance is far off), and on
    nearly constant token vectors (where the place of eps matters). When the answer matches
    a classic mistake on every case (unbiased variance, eps outside the square root), the
    message says which.
    """
    generator = torch.Generator().manual_seed(9)
    cases = []
    for width in (24, 4):
        x = torch.randn(2, 6, width, generator=generator) * 3.0 + 1.5
        weight = torch.randn(width, generator=generator) * 0.5 + 1.0
        bias = torch.randn(width, generator=generator) * 0.5
        cases.append((x, weight, bias, 1e-5))
    flat = 1e-3 * torch.randn(1, 3, 24, generator=generator)  # variance 1e-6, below eps
    cases.append((flat, torch.ones(24), torch.zeros(24), 1e-5))

    def attempt() -> str | None:
        answers = [layer_norm(x.clone(), w.clone(), b.clone(), eps) for x, w, b, eps in cases]
        for answer, (x, weight, bias, eps) in zip(answers, cases):
            expected = torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)
            problem = compare(answer, expected, name=f"layer_norm(x of shape {tuple(x.shape)})")
            if problem is not None:
                break
        else:
            return None
        for description, mistake in _nb09_layer_norm_mistakes().items():
            if all(
                isinstance(a, torch.Tensor)
                and a.shape == c[0].shape
                and torch.allclose(a.detach().double(), mistake(*c).double(), atol=1e-5)
                for a, c in zip(answers, cases)
            ):
                return f"{problem}; it matches {description}"
        return problem

    return run_check("layer_norm", attempt)


def check_pre_ln_residual(pre_ln_residual: Callable) -> bool:
    """Check ``pre_ln_residual(x, norm, sublayer)`` returns ``x + sublayer(norm(x))``.

    Uses a ``(2, 6, 24)`` input, an ``nn.LayerNorm(24)`` with a non-trivial scale and shift,
    and a linear sublayer. Names the post-LN ordering and a missing residual when seen.
    """
    generator = torch.Generator().manual_seed(10)
    x = torch.randn(2, 6, 24, generator=generator) * 2.0 + 0.5
    norm = torch.nn.LayerNorm(24)
    sublayer = torch.nn.Linear(24, 24)
    with torch.no_grad():
        for parameter in (*norm.parameters(), *sublayer.parameters()):
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3 + 0.1)

    def attempt() -> str | None:
        with torch.no_grad():
            answer = pre_ln_residual(x.clone(), norm, sublayer)
            expected = x + sublayer(norm(x))
            problem = compare(answer, expected, name="pre_ln_residual(x)")
            if problem is None or not isinstance(answer, torch.Tensor):
                return problem
            mistakes = {
                "norm(x + sublayer(x)), the post-LN order of the paper": norm(x + sublayer(x)),
                "sublayer(norm(x)) without the residual: add x back": sublayer(norm(x)),
                "norm(x) + sublayer(norm(x)): the residual must carry x itself, "
                "not its normalised copy": norm(x) + sublayer(norm(x)),
            }
            for description, wrong in mistakes.items():
                if answer.shape == wrong.shape and torch.allclose(answer, wrong, atol=1e-5):
                    return f"{problem}; you computed {description}"
            return problem

    return run_check("pre_ln_residual", attempt)


# --- notebook 10: feed-forward network ---


def check_feed_forward(feed_forward: Callable) -> bool:
    """Check ``feed_forward(x, w1, b1, w2, b2)`` = ``GELU(x W1^T + b1) W2^T + b2``.

    Weights use ``nn.Linear``'s layout: ``w1`` is ``(d_ff, C)``, ``w2`` is ``(C, d_ff)``.
    Two cases: ``(B, T, C) = (2, 6, 24)`` with ``d_ff = 96``, and ``(3, 5, 10)`` with
    ``d_ff = 40`` (catches hard-coded sizes). Names ReLU, the tanh approximation of GELU and
    missing biases when the answer matches them.
    """
    generator = torch.Generator().manual_seed(11)
    cases = []
    for shape, d_ff in (((2, 6, 24), 96), ((3, 5, 10), 40)):
        d_model = shape[-1]
        x = torch.randn(*shape, generator=generator)
        w1 = torch.randn(d_ff, d_model, generator=generator) / d_model**0.5
        b1 = torch.randn(d_ff, generator=generator) * 0.5
        w2 = torch.randn(d_model, d_ff, generator=generator) / d_ff**0.5
        b2 = torch.randn(d_model, generator=generator) * 0.5
        cases.append((x, w1, b1, w2, b2))

    def attempt() -> str | None:
        functional = torch.nn.functional
        for x, w1, b1, w2, b2 in cases:
            answer = feed_forward(x.clone(), w1.clone(), b1.clone(), w2.clone(), b2.clone())
            hidden = functional.linear(x, w1, b1)  # (..., C) -> (..., d_ff)
            expected = functional.linear(functional.gelu(hidden), w2, b2)  # -> (..., C)
            problem = compare(answer, expected, name=f"feed_forward(x of shape {tuple(x.shape)})")
            if problem is None or not isinstance(answer, torch.Tensor):
                if problem is not None:
                    return problem
                continue
            mistakes = {
                "ReLU instead of GELU": functional.linear(functional.relu(hidden), w2, b2),
                "the tanh approximation of GELU; use the exact one, F.gelu(h)": functional.linear(
                    functional.gelu(hidden, approximate="tanh"), w2, b2
                ),
                "no biases": functional.linear(functional.gelu(x @ w1.T), w2),
            }
            for description, wrong in mistakes.items():
                if answer.shape == wrong.shape and torch.allclose(answer, wrong, atol=1e-5):
                    return f"{problem}; it matches {description}"
            return problem
        return None

    return run_check("feed_forward", attempt)


def check_ffn_parameter_count(count_ffn_parameters: Callable) -> bool:
    """Check ``count_ffn_parameters(d_model, d_ff)`` = ``2 * d_model * d_ff + d_ff + d_model``.

    Tried on (24, 96), (512, 2048) (the paper's base model) and (10, 7); the answer must be
    a Python int.
    """

    def attempt() -> str | None:
        for d_model, d_ff in ((24, 96), (512, 2048), (10, 7)):
            answer = count_ffn_parameters(d_model, d_ff)
            expected = 2 * d_model * d_ff + d_ff + d_model
            call = f"count_ffn_parameters({d_model}, {d_ff})"
            if isinstance(answer, bool) or not isinstance(answer, int):
                return f"{call} should return an int, got {type(answer).__name__}"
            if answer == expected:
                continue
            hints = {
                2 * d_model * d_ff: "the two weight matrices without the biases (d_ff + d_model)",
                d_model * d_ff + d_ff: "only the first layer",
                d_model * d_ff + d_model: "only the second layer",
                2 * d_model * d_ff + 2 * d_model: "a bias of size d_model on both layers; the "
                "first layer's bias has d_ff entries",
            }
            hint = f"; that is {hints[answer]}" if answer in hints else ""
            return f"{call} returned {answer:,}, expected {expected:,}{hint}"
        return None

    return run_check("count_ffn_parameters", attempt)


# --- notebook 11: decoder block and logits ---


def check_top_k_filter(top_k_filter: Callable) -> bool:
    """Check ``top_k_filter(logits, k)``: keep the k largest logits of each row (last axis),
    set the rest to ``-inf``.

    Tried on ``(4, 10)`` logits with k = 3, ``(2, 3, 10)`` with k = 1 and ``(2, 10)`` with
    k = 10 (nothing removed). Says when removed entries are 0 instead of ``-inf``, when a row
    keeps the wrong number of entries, and when the answer is already probabilities.
    """
    generator = torch.Generator().manual_seed(12)
    cases = [
        (torch.randn(4, 10, generator=generator) * 2.0, 3),
        (torch.randn(2, 3, 10, generator=generator) * 2.0, 1),
        (torch.randn(2, 10, generator=generator) * 2.0, 10),
    ]

    def attempt() -> str | None:
        for logits, k in cases:
            answer = top_k_filter(logits.clone(), k)
            kth_largest = torch.topk(logits, k, dim=-1).values[..., -1:]
            remove = logits < kth_largest
            expected = logits.masked_fill(remove, float("-inf"))
            name = f"top_k_filter(logits of shape {tuple(logits.shape)}, k={k})"
            if not isinstance(answer, torch.Tensor) or answer.shape != expected.shape:
                return compare(answer, expected, name=name)
            answer = answer.detach()
            if (answer >= 0).all() and torch.allclose(
                answer.sum(-1).double(), torch.ones(answer.shape[:-1], dtype=torch.double)
            ):
                return f"{name} returned probabilities (rows sum to 1); return filtered logits"
            if remove.any() and (answer[remove] == 0).all():
                return (
                    f"{name} sets removed logits to 0; use -inf, since softmax gives a 0 logit "
                    "a positive probability"
                )
            kept = (answer != float("-inf")).sum(-1)
            if (kept != k).any():
                return f"{name} keeps {kept.flatten().tolist()} entries per row, expected k={k}"
            problem = compare(answer == float("-inf"), remove, name=f"{name}'s -inf mask")
            if problem is not None:
                return problem + " (keep the k largest, not the k smallest)"
            problem = compare(answer.masked_fill(remove, 0.0), expected.masked_fill(remove, 0.0))
            if problem is not None:
                return f"the kept logits of {name} changed: {problem}"
        return None

    return run_check("top_k_filter", attempt)


def check_greedy_next_token(greedy_next_token: Callable) -> bool:
    """Check ``greedy_next_token(logits)``: logits ``(B, T, V)`` -> the most likely next id at
    the *last* position, shape ``(B, 1)``, int64.

    Says when the answer uses the first position, or drops the ``(B, 1)`` shape that
    ``torch.cat([ids, next_id], dim=1)`` needs.
    """
    generator = torch.Generator().manual_seed(13)
    cases = [torch.randn(2, 6, 84, generator=generator), torch.randn(3, 1, 5, generator=generator)]

    def attempt() -> str | None:
        for logits in cases:
            answer = greedy_next_token(logits.clone())
            expected = logits[:, -1, :].argmax(dim=-1, keepdim=True)  # (B, V) -> (B, 1)
            name = f"greedy_next_token(logits of shape {tuple(logits.shape)})"
            problem = compare(answer, expected, name=name)
            if problem is None:
                continue
            if isinstance(answer, torch.Tensor) and answer.shape == expected.shape[:1]:
                return f"{problem}; keep the (B, 1) shape (keepdim=True) for torch.cat(dim=1)"
            first = logits[:, 0, :].argmax(dim=-1, keepdim=True)
            if isinstance(answer, torch.Tensor) and torch.equal(answer, first):
                return f"{problem}; that is the first position: the next token follows the last one"
            return problem
        return None

    return run_check("greedy_next_token", attempt)
