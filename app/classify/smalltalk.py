"""Detect pure small talk: greetings, thanks, acknowledgements, laughter, filler, emoji.

The test is deliberately conservative: a message is small talk only when *nothing* is
left after the known small-talk phrases, punctuation, symbols and emoji are removed.
A short message with one content word ("I prefer tea", "明天9点开会") therefore keeps
its content and is not small talk. Storing a greeting by mistake costs little; dropping a
real fact because it was short would lose memory, so every doubt resolves to ``False``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from app.classify.stopwords import word_set

__all__ = ["is_small_talk"]

# Small talk is short; anything longer carries content (and skipping the regex work keeps
# this cheap on 900-character chunks).
_MAX_SMALL_TALK_CHARS = 80

# English phrases, matched as whole words on lower-cased text. Longer phrases first so
# "thank you so much" is removed as a unit rather than leaving "so much" behind.
_EN_PHRASES: tuple[str, ...] = (
    # greetings and farewells
    r"good (?:morning|afternoon|evening|night|day)",
    r"how(?:'s| is| are| was) (?:it going|you(?: doing)?|things|your (?:day|week|weekend)"
    r"|everything)(?: going)?",
    r"how are ya",
    r"what'?s up",
    r"(?:nice|good|great) to (?:see|meet|hear from) you",
    r"long time no see",
    r"see (?:you|ya)(?: (?:later|soon|tomorrow|around|then))?",
    r"talk (?:to you )?(?:later|soon|tomorrow)",
    r"have a (?:good|nice|great|lovely) (?:one|day|night|evening|weekend|trip)",
    r"take care",
    r"good ?bye",
    r"bye(?: ?bye)?",
    r"hi+|hello+|hey+|heya|hiya|howdy|yo|sup|greetings|morning|evening|night|gm|gn",
    r"cya|ttyl|brb|gtg|g2g",
    # thanks and replies to thanks
    r"thank (?:you|u)(?: (?:so|very) much| a lot| again)?",
    r"thanks(?: (?:so|very) much| a lot| a bunch| again| for (?:that|this|everything|the help))?",
    r"thx|tx|ty|tysm|cheers|much appreciated|appreciate it",
    r"(?:you're|you are|youre) welcome|no problem|no worries|np|my pleasure|anytime",
    r"you too|same to you|same here|me too",
    r"sorry|my bad|oops|whoops",
    # acknowledgements and reactions
    r"sounds (?:good|great|fine|perfect)",
    r"got it|gotcha|understood|noted|i see|makes sense|fair enough|will do",
    r"ok(?:ay|ey|ie)?|k+|kk|alright|all right|sure(?: thing)?|of course",
    r"yes|yeah|yea|yep|yup|ya|no|nope|nah|right|true|exactly|indeed|agreed|correct",
    r"(?:i'?m |i am )?(?:fine|good|great|ok|okay|doing (?:well|good|fine))",
    r"not bad|fine|cool|nice|great|awesome|perfect|amazing|wonderful|excellent|neat|sweet",
    r"good (?:job|work)|well done|nice (?:one|work)|congrats|congratulations|bravo",
    r"love it|wow|whoa|omg|oh|ah|aha|ahh|uh|um+|hm+|huh|meh|yay",
    r"lol|lmao|rofl|haha(?:ha)*|hehe(?:he)*|xd",
    # vocatives and intensifiers that only ever decorate the phrases above
    r"there|everyone|everybody|guys|all|man|dude|buddy|mate|bro|friend|again|so|very|really",
    r"please|pls|plz|then|well|and|too",
)

# Chinese phrases, matched as substrings (Chinese has no spaces), longest first so "好的"
# goes as a unit before "好". Removing a character from a content word cannot make a
# message count as small talk, because the rest of the word stays behind, so substring
# matching is safe here.
_ZH_PHRASES: Final = sorted(
    word_set(
        """
        早上好 上午好 中午好 下午好 晚上好 早安 午安 晚安 你好 您好 大家好
        哈喽 哈啰 嗨 在吗 在不在 你呢 最近怎么样 最近好吗 过得怎么样 今天 最近
        谢谢你 谢谢您 谢谢 多谢 感谢 谢了 辛苦了 辛苦 麻烦了 不客气 没事
        没关系 不好意思 抱歉 对不起 拜拜 再见 回头见 明天见 晚点聊 好的 好滴
        好嘞 好吧 好呀 好哒 好啊 好 行 可以 没问题 收到 了解 明白了 明白
        知道了 懂了 是的 是啊 是吗 真的吗 对的 对 没错 厉害 太棒了 棒 赞 牛
        加油 666 哈 嘿 呵 嘻 嗯 哦 噢 喔 啊 呃 额 哇 呀 啦 吧 呢 了
        """
    ),
    key=len,
    reverse=True,
)

_EN_RE = re.compile(
    r"(?<![a-z0-9'])(?:" + "|".join(_EN_PHRASES) + r")(?![a-z0-9'])",
)
_ZH_RE = re.compile("|".join(re.escape(p) for p in _ZH_PHRASES))


def _has_content(text: str) -> bool:
    """True when any letter or digit remains (emoji, symbols, punctuation do not count)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


def is_small_talk(text: str) -> bool:
    """Tell whether a message is pure small talk with nothing worth remembering.

    Greetings, thanks, acknowledgements, laughter, filler and emoji-only messages are small
    talk in English and Chinese ("hi", "thanks!", "ok 👍", "哈哈", "好的", "嗯嗯", "早上好").
    A message with any substantive word left over is not ("I prefer tea", "明天9点开会").

    Args:
        text: the message, any language.

    Returns:
        ``True`` only when the whole message is small talk; ``False`` for empty text.
    """
    stripped = text.strip()
    if not stripped or len(stripped) > _MAX_SMALL_TALK_CHARS:
        return False
    if not _has_content(stripped):
        # Emoji, punctuation or symbols only ("👍", "🙏🙏", "...").
        return True
    lowered = stripped.lower().replace("’", "'")
    leftover = _ZH_RE.sub(" ", _EN_RE.sub(" ", lowered))
    return not _has_content(leftover)
