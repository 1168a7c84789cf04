"""English and Chinese stop words for concept extraction.

Besides grammatical words, both lists hold chat filler and the generic verbs that the
category rules key on ("decided", "决定", "需要"): they say what *kind* of memory a text
is, not what it is *about*, so they would only crowd the concept list.
"""

from __future__ import annotations

from typing import Final

__all__ = ["EN_STOP_WORDS", "ZH_STOP_WORDS", "word_set"]


def word_set(block: str) -> frozenset[str]:
    """The whitespace-separated words of a text block (long word lists read best as text)."""
    return frozenset(block.split())


EN_STOP_WORDS: Final[frozenset[str]] = word_set(
    """
    a about above after again against ago all almost along already also although always am
    among an and another any anybody anyone anything anyway anywhere are aren't around as
    ask asked at away back be became because become been before behind being below beside
    besides best better between both but by can can't cannot could couldn't did didn't do
    does doesn't doing don't done down during each either else enough even ever every
    everybody everyone everything everywhere few for from further get gets getting give
    given go goes going gone got gotten had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's however i i'd i'll
    i'm i've if in into is isn't it it's its itself just keep kind know known least less
    let let's like likely made make makes making many may maybe me might mine more most
    much must my myself need needs neither never new next no nobody none nor not nothing now
    nowhere of off often oh ok okay old on once one only onto or other others otherwise our
    ours ourselves out over own per perhaps please put quite rather really right said same
    say says see seem seemed seems several shall she she'd she'll she's should shouldn't
    since so some somebody someone something sometimes somewhat soon still such sure take
    taken tell than that that's the their theirs them themselves then there there's these
    they they'd they'll they're they've thing things think this those though through thus
    to today together tomorrow too took toward towards try trying under unless until up upon
    us use used uses using very via want wanted wants was wasn't way we we'd we'll we're
    we've well went were weren't what what's whatever when where where's whether which while
    who who's whole whom whose why will with within without won't would wouldn't yeah yes
    yet you you'd you'll you're you've your yours yourself yourselves
    yesterday tonight week weekend month year day days time times lot lots bit stuff last first
    actually basically probably definitely literally honestly anyway kinda gonna wanna gotta
    thanks thank hello hey hi lol haha hmm okay alright cool nice great good bad
    decided decide decision chose choose prefer prefers preferred learned learnt realized
    found finished completed note remember question todo going able sounds seem feel felt
    think thought guess mean means meant call called look looking looks way ways also etc
    """
)

ZH_STOP_WORDS: Final[frozenset[str]] = word_set(
    """
    我们 你们 他们 她们 它们 咱们 大家 自己 别人 人家 我的 你的 他的 她的 这个 那个 这些 那些
    这样 那样 这么 那么 这种 那种 这里 那里 这边 那边 哪里 哪儿 哪个 什么 怎么 怎样 怎么样 如何
    为什么 为啥 因为 所以 但是 可是 不过 然后 而且 并且 或者 还是 如果 虽然 即使 尽管 只是 只有
    已经 正在 可以 可能 应该 需要 必须 一定 一下 一些 一点 一个 一样 一起 一直 一般 一边 没有
    不是 就是 还有 以及 关于 对于 通过 进行 使用 之后 之前 以后 以前 时候 现在 今天 明天 昨天
    后天 刚才 刚刚 马上 非常 特别 比较 真的 其实 觉得 认为 知道 希望 感觉 好像 有点 有些 而已
    还是 或是 不会 不能 不要 不用 就要 能够 是否 的话 的时候 之类 等等 等于 东西 事情 问题 时间
    今年 去年 明年 这次 上次 下次 每次 有时 有时候 最近 目前 终于 其他 其中 另外 而是 于是 然而
    因此 比如 例如 包括 一直 已 决定 喜欢 发现 明白 完成 计划 注意 记住 记得 打算 准备 确定 选择
    帮我 一下子 好的 谢谢 哈哈 嗯嗯 你好 请问 告诉 看看 想想 觉得 知道了 可以吗 是不是 有没有
    能不能 要不要 多少 怎么办 以为 搞定 做完 已经 总是 还要 还会 还能 起来 出来 下来 上去 过来
    """
)
