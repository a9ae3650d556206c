"""Function words that carry no topic: dropped from questions unless nothing else is left.

The English list is the classic IR list (articles, pronouns, auxiliaries, question words,
prepositions) kept short on purpose: words such as ``first``, ``last``, ``never`` or ``after``
often decide what a question is about, so they stay searchable. The Chinese list holds
particles, pronouns and question words that ``rjieba`` cuts out as words of their own.
"""

from __future__ import annotations

__all__ = ["EN_STOPWORDS", "ZH_STOPWORDS"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


EN_STOPWORDS: frozenset[str] = _words(
    """
    a about am an and any are aren as at be been being both but by can could couldn did didn
    do does doesn doing don down during each for from had hadn has hasn have haven having he
    her here hers herself him himself his how i if in into is isn it its itself just ll me
    might mightn more most must mustn my myself no nor not now of off on once only or other
    our ours ourselves out over own re s same shall shan she should shouldn so some such t
    than that the their theirs them themselves then there these they this those through to
    too under until up ve very was wasn we were weren what when where which while who whom
    whose why will with won would wouldn y you your yours yourself yourselves
    also anything something ever yet let lets us may
    """
)

ZH_STOPWORDS: frozenset[str] = _words(
    """
    的 了 是 在 和 与 及 或 也 都 就 还 又 吗 呢 吧 啊 呀 哦 嗯 么 着 过 被 把 给 让 对 从 向 于
    我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 这 那 这个 那个 这些 那些 这样 那样
    什么 怎么 怎样 怎么样 如何 为什么 为何 哪 哪里 哪儿 哪些 哪个 谁 几 多少 是否 是不是 有没有
    有 没有 一个 一些 会 能 可以 要 想 请 问 一下 之 其 而 但 但是 如果 因为 所以 然后 吗
    """
)
