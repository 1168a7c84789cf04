"""Rule-based memory categories for English, Chinese and mixed text.

Each category owns a few weighted rules; a rule is one alternation of phrases. A rule that
fires adds its weight to the category's evidence; further hits of the same rule (the same
phrase again, or another phrase of it) add half the weight, at most twice, so one long
chunk does not drown the rest. The category with the most evidence wins; ``general`` is the
answer when no category collects enough evidence, or when the text is pure small talk.

Weights follow one scale so that rules stay comparable:

* ``STRONG`` (3): the phrase names the category almost by itself ("decided", "决定",
  "prefer", "喜欢", "remind me", "待办", "a trailing question mark").
* ``MEDIUM`` (2): usually the category, but other readings exist ("need to", "需要",
  "finished", "原因是", a sentence starting with "what").
* ``WEAK`` (1): a hint that only counts together with others ("tomorrow", "终于",
  "because", "其实").

English patterns are wrapped in ASCII letter boundaries instead of ``\\b``: in Python's
Unicode regexes Chinese characters are word characters, so ``\\b`` would fail on
"我们decided用它" where English sits directly beside Chinese. They are matched on the
lower-cased text, and a script's rules are skipped when the text has none of its letters.

The rules were written from how people phrase these things in chat, then checked against
``tests/data/classify_labelled.jsonl``; ``bench/classify_report.py`` prints the accuracy.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Final

from app.classify.smalltalk import is_small_talk
from app.scripts import has_han

__all__ = ["Category", "CategoryResult", "classify_category", "line_categories"]


class Category(StrEnum):
    """What kind of memory a piece of text is."""

    DECISION = "decision"
    PREFERENCE = "preference"
    LEARNING = "learning"
    TASK = "task"
    PROGRESS = "progress"
    QUESTION = "question"
    NOTE = "note"
    GENERAL = "general"


@dataclass(frozen=True, slots=True)
class CategoryResult:
    """The winning category, how sure the rules are (0–1), and the evidence per category.

    ``scores`` maps every category name to its summed rule weight (0 when nothing fired);
    the values are unbounded evidence, not probabilities.
    """

    category: Category
    confidence: float
    scores: dict[str, float] = field(default_factory=dict)


STRONG: Final = 3.0
MEDIUM: Final = 2.0
WEAK: Final = 1.0

# Below this much evidence the text is "general": a single weak hint such as "tomorrow"
# or "already" appears in ordinary chatter too often to decide a category by itself.
_MIN_EVIDENCE: Final = 1.5
# Each further hit of the same rule adds this fraction of its weight, at most
# _MAX_REPEATS times, so repetition counts without letting one rule dominate.
_REPEAT_FACTOR: Final = 0.5
_MAX_REPEATS: Final = 2
# Confidence = share of evidence * saturation(evidence); the saturation scale makes one
# strong pattern alone worth ~0.7 and two strong patterns ~0.9.
_SATURATION: Final = 2.5
_CONFIDENCE_NO_SIGNAL: Final = 0.6
_CONFIDENCE_WEAK_SIGNAL: Final = 0.4
_CONFIDENCE_SMALL_TALK: Final = 0.9

# Ties go to the category that is most useful to remember.
_PRIORITY: Final = (
    Category.DECISION,
    Category.TASK,
    Category.PREFERENCE,
    Category.NOTE,
    Category.LEARNING,
    Category.PROGRESS,
    Category.QUESTION,
)

# Start of a sentence: text start or after sentence punctuation / a newline.
_SENT_START: Final = r"(?:^|(?<=[.!?;:。！？；：\n]))\s*"

_WEEKDAYS: Final = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend)"


class _Script(Enum):
    """Which text a pattern reads: English patterns read the lower-cased text."""

    LATIN = "latin"
    CJK = "cjk"
    ANY = "any"


@dataclass(frozen=True, slots=True)
class _Pattern:
    regex: re.Pattern[str]
    script: _Script


@dataclass(frozen=True, slots=True)
class _Rule:
    category: Category
    weight: float
    pattern: _Pattern


_ESCAPE_RE: Final = re.compile(r"\\.")


def _en(*alternatives: str) -> _Pattern:
    """English alternatives inside ASCII letter boundaries, matched on lower-cased text.

    Lower-casing the text once and compiling without ``re.IGNORECASE`` is about three
    times faster, so the patterns themselves must be lower case.
    """
    body = "|".join(alternatives)
    if any(ch.isupper() for ch in _ESCAPE_RE.sub("", body)):
        raise ValueError(f"English patterns must be lower case: {body!r}")
    regex = re.compile(rf"(?<![a-z])(?:{body})(?![a-z])", re.MULTILINE)
    return _Pattern(regex, _Script.LATIN)


def _zh(*alternatives: str) -> _Pattern:
    """Chinese alternatives; Chinese needs no word boundaries."""
    return _Pattern(re.compile("|".join(alternatives), re.MULTILINE), _Script.CJK)


def _any(*alternatives: str) -> _Pattern:
    """Script-neutral alternatives (punctuation, numbers)."""
    return _Pattern(re.compile("|".join(alternatives), re.MULTILINE), _Script.ANY)


# Compiled once at import: the classifier runs on every stored chunk.
_RULES: Final[tuple[_Rule, ...]] = (
    # ---------------------------------------------------------------- decision
    _Rule(
        Category.DECISION,
        STRONG,
        _en(
            r"decided",
            r"decision was made",
            r"made (?:a|the|my|our) (?:final )?(?:decision|call)",
            r"(?:let'?s|we'?ll|i'?ll|we will|i will|we'?re|i'?m) (?:just )?go(?:ing)? with",
            r"settled? on",
            r"(?:it|that)(?:'?s| is) (?:settled|decided|final)",
            r"opted (?:for|to)",
            r"(?:chose|chosen|picked) (?:to|the|a|an)",
            r"(?:we|i|they|everyone) (?:all )?agreed",
            r"agreed (?:to|on|that)",
            r"final (?:call|choice|answer|decision|plan)",
            r"(?:the|our|my) call is",
            r"made up (?:my|our) minds?",
            r"voted (?:to|for|against)",
            r"\w+ it is\b",
        ),
    ),
    _Rule(
        Category.DECISION,
        MEDIUM,
        _en(
            r"(?:we|i)(?:'re| are|'m| am) (?:switching|moving|migrating) (?:over )?to",
            r"(?:switch|switched|migrate|migrated|move|moved) (?:over )?(?:from \S+ )?to",
            r"(?:we|i)(?: will|'ll|'re going to| are going to|'m going to| am going to) "
            r"(?:use|adopt|go with|stick with|keep using|standardi[sz]e on)",
            # A present-progressive change of plan: "I'm not renewing", "we're dropping X".
            r"(?:i'?m|i am|we'?re|we are) (?:not )?(?:renewing|cancell?ing|keeping|dropping|"
            r"taking|switching|skipping|selling|buying)",
            r"switch(?:ing|ed)?",
            r"(?:i|we) (?:won'?t|will not|(?:'m|am|'re|are) not going to) \w+",
            r"after all",
            r"from now on|going forward|in the end",
            r"approved",
            r"stick(?:ing)? with",
            r"go(?:ing)? ahead with",
            r"no longer (?:use|using)",
            r"instead of",
            r"rather than",
            r"decide",
            r"decision",
            r"chose",
            r"choose",
        ),
    ),
    _Rule(
        Category.DECISION,
        WEAK,
        _en(r"drop(?:ping)?", r"ditch(?:ing)?", r"cancel(?:led|ed)?", r"for now", r"stays?"),
    ),
    _Rule(
        Category.DECISION,
        STRONG,
        _zh(
            r"决定",
            r"敲定",
            r"拍板",
            r"选定",
            r"定下来",
            r"就这么(?:定|办)",
            r"决策",
            r"(?<![不没])确定(?!吗|不|一下)",
            r"就(?:用|选|定)(?!了吗)",
            r"最终(?:选|用|决定|采用|方案|版本)",
            r"(?:最后|最终)还是",
            r"改用",
            r"换成",
            r"改成",
            r"统一(?:用|使用|采用)",
            r"采用",
            # "定了" but not inside 稳定了 / 确定了 / 一定了 …, which are other words.
            r"(?<![稳确固一肯决约规指设鉴否特安坚])定了",
            r"定(?:在|成|为)",
            r"(?:想|考虑)(?:清楚|好)了",
            r"说好了",
        ),
    ),
    _Rule(
        Category.DECISION,
        MEDIUM,
        _zh(
            r"选(?:择)?了",
            r"选择",
            r"不再",
            r"放弃(?:了)?",
            r"还是用",
            r"同意了?",
            r"以后(?:都|就)用",
            r"而不是",
            # 不…了 marks a change of plan: "不去南京了", "健身卡不续了".
            r"不(?!知道|行|早|见|对|错|好|少|多|稳定|舒服|开心|高兴|方便|清楚|一样|习惯)"
            r"[\u4e00-\u9fff]{1,5}了",
            r"先不(?:做|搞|管|动|考虑)",
            r"还是(?:买|用|选|去|定)",
            r"固定(?:在|为)",
            r"接受了",
            r"(?:从今以后|从现在起|以后都|今后)",
            r"(?:就|都)按",
            r"(?:商量|讨论|研究)(?:完|好|过)",
        ),
    ),
    _Rule(Category.DECISION, WEAK, _zh(r"方案", r"取消")),
    # ---------------------------------------------------------------- preference
    _Rule(
        Category.PREFERENCE,
        STRONG,
        _en(
            r"prefer(?:s|red|ence|ences|ably)?",
            r"(?:i|we|she|he|they) (?:really |much |also |absolutely |kind of |kinda )?"
            r"(?:like|love|enjoy|hate|dislike|adore|loathe)s?",
            r"(?:don'?t|do not|doesn'?t|does not|never) (?:really )?(?:like|enjoy|care for)",
            r"favou?rites?",
            r"(?:i'?d|i would|we'?d|we would) (?:much |really |still |always )?rather",
            r"can'?t stand",
            r"my go-to",
            r"fan of",
            r"not a fan",
            r"(?:is|are) (?:not )?my (?:thing|jam|cup of tea)",
            r"the \w+er the better",
        ),
    ),
    _Rule(
        Category.PREFERENCE,
        MEDIUM,
        _en(
            r"(?:more|most|less) comfortable",
            r"works better for me",
            r"suits me",
            r"my (?:style|taste)",
            r"to my taste",
            r"(?:please )?(?:always|never) "
            r"(?:use|reply|answer|write|respond|call me|give me|send me)",
            r"(?:i|we) (?:usually|typically|tend to|generally)",
            # "Tea over coffee", "Vanilla over chocolate, every time".
            _SENT_START + r"\w+(?: \w+)? over \w+",
            r"(?:every time|any day|for me)",
            # How the assistant should talk: tone, format, units, theme.
            r"(?:keep|make) (?:it|the \w+|your \w+|answers?|replies|responses)"
            r"(?: \w+)? (?:short|brief|concise|casual|formal|simple|friendly)",
            r"(?:dark|light) mode",
            r"(?:give|show|send|tell) me .{1,30}? first",
            r"(?:i find|finds?) .{1,30}? (?:annoying|boring|tedious|relaxing|stressful|overrated)",
            r"(?:bores?|annoys?|bothers?) me",
            r"(?:don'?t|do not|never) (?:eat|drink)",
            r"(?:metric|imperial) units?|celsius|fahrenheit",
        ),
    ),
    _Rule(Category.PREFERENCE, WEAK, _en(r"rather", r"instead", r"taste", r"please")),
    _Rule(
        Category.PREFERENCE,
        STRONG,
        _zh(
            r"喜欢",
            r"倾向",
            r"更愿意",
            r"宁愿",
            r"宁可",
            r"偏好",
            r"偏爱",
            r"讨厌",
            r"最爱",
            r"受不了",
            r"钟爱",
            r"不爱",
            r"合(?:我)?(?:胃口|口味|心意)",
            r"爱(?:吃|喝|看|听|玩|用|去)",
            r"(?:不|更|比较)(?:习惯|想要)",
            r"反感",
            r"我?不(?:吃|喝)",
            r"(?:别|不要)(?:再)?(?:给我|跟我|帮我)",
            r"偏[清甜咸辣酸淡重软硬]",
            r"优先(?!级)",
            r"称呼我|(?:以后|就|请)叫我",
            r"越\w越好",
        ),
    ),
    _Rule(
        Category.PREFERENCE,
        MEDIUM,
        _zh(
            r"习惯",
            r"偏向",
            r"首选",
            r"更(?:好|适合我)",
            r"(?:用|以)(?:中文|英文|英语|简体|繁体)",
            r"我(?:一般|通常|总是|平时|向来|从来|只)",
            r"总是(?:选|用|点|喝|吃|坐|买)",
            r"(?:简短|简洁|随意|正式|详细|口语化)(?:一点|些)",
            r"(?:更|比较|挺|很)?顺手",
            r"比起|相比",
        ),
    ),
    _Rule(Category.PREFERENCE, WEAK, _zh(r"口味", r"风格", r"一般", r"通常", r"舒服")),
    # ---------------------------------------------------------------- learning
    _Rule(
        Category.LEARNING,
        STRONG,
        _en(
            r"(?:i|we|i'?ve|we'?ve) (?:just |finally |recently |only )?"
            r"(?:learned|learnt|realized|realised|discovered|figured out|found out|noticed)",
            r"today i learned",
            _SENT_START + r"til",
            r"turn(?:s|ed) out",
            r"lessons? learned",
            r"(?:did not|didn'?t|never) know",
            r"had no idea",
            r"(?:now|finally) (?:i )?(?:understand|get it|see why|know why|know how)",
            r"the (?:trick|secret|key) (?:is|was|to|with|for)",
            # Subject often dropped in chat: "Finally figured out …".
            r"figured out",
            r"found out",
            r"discovered",
            r"that'?s (?:why|how)",
            r"who knew",
            r"apparently",
        ),
    ),
    _Rule(
        Category.LEARNING,
        MEDIUM,
        _en(
            r"the (?:root )?(?:reason|cause|culprit|issue|problem|bug)\b.{0,40}?\b(?:is|was)",
            r"all along",
            r"explained (?:that|how|why)",
            r"(?:doctor|physio|therapist|dentist|teacher|expert|coach)\w* (?:says|said|told me)",
            r"seems like|it seems",
            r"it(?:'s| is| was) because",
            r"(?:found|find) (?:out )?that",
            r"makes sense now",
            r"insights?",
            r"takeaways?",
            r"lesson",
            r"learn(?:ed|t|ing)?",
            r"realiz(?:e|ed|ation)",
        ),
    ),
    _Rule(
        Category.LEARNING,
        WEAK,
        _en(r"understand", r"interesting", r"means that", r"because", r"actually", r"makes sense"),
    ),
    _Rule(
        Category.LEARNING,
        STRONG,
        _zh(
            r"学到",
            r"学会",
            r"原来",
            r"(?:刚|才)(?:知道|发现|明白|意识到|懂)",
            r"问题(?:出在|在于)",
            r"了解到",
            r"意识到",
            r"认识到",
            r"体会到",
            r"教训",
            r"心得",
            r"(?:搞|弄)(?:懂|明白)",
            r"理解了",
            r"明白了",
            r"诀窍|窍门|秘诀",
            r"难怪|怪不得",
        ),
    ),
    _Rule(
        Category.LEARNING,
        MEDIUM,
        _zh(
            r"发现",
            r"明白",
            r"收获",
            r"原因是",
            r"是因为",
            r"没想到",
            r"知道了",
            r"懂了",
            r"涨知识",
            r"经验",
            r"看来",
            r"查了(?:一)?下",
            r"(?:医生|老师|专家)说",
        ),
    ),
    _Rule(
        Category.LEARNING,
        WEAK,
        _zh(r"竟然", r"居然", r"其实", r"总结", r"理解", r"反而", r"主要是"),
    ),
    # ---------------------------------------------------------------- task
    _Rule(
        Category.TASK,
        STRONG,
        _en(
            r"to-?dos?",
            r"action items?",
            r"remind me",
            r"(?:don'?t|do not) forget",
            r"remember to",
            r"deadline",
            r"due (?:by|on|date|today|tomorrow|next)",
            r"(?:add|put) .{1,40}? (?:to|on|in) (?:my|the) (?:\w+ )?"
            r"(?:list|calendar|todo|schedule|reminders)",
        ),
    ),
    # A request for an action, even phrased as a question ("Can you book …?").
    _Rule(
        Category.TASK,
        STRONG,
        _en(
            r"(?:can|could|would) you (?:please )?(?:add|book|remind|schedule|send|set|create|"
            r"order|buy|call|put|move|cancel|make|email|text)",
        ),
    ),
    _Rule(
        Category.TASK,
        MEDIUM,
        _en(
            r"(?:need|needs|have|has|got) to",
            r"must",
            r"gotta",
            r"(?:plan|planning|going|intend) to",
            r"next steps?",
            r"(?:by|before|until) (?:tomorrow|tonight|noon|eod|the end of|end of|next|"
            rf"{_WEEKDAYS}|the \d+(?:st|nd|rd|th))",
            r"book (?:a |the |me )?(?:flight|table|hotel|ticket|room|appointment|slot)",
            r"schedule (?:a|the|an)",
            r"set up a",
            # An imperative verb opening a sentence ("Buy milk", "Renew the passport").
            _SENT_START + r"(?:please )?(?:buy|call|email|text|send|book|pay|renew|finish|submit|"
            r"prepare|review|fix|write|pick up|clean|check|update|order|ask|schedule|cancel|"
            r"make sure|pack|charge|print|water|feed|sign up|register|bring|return|drop off|"
            r"grab|get|wash|tell|reply|draft|start|move|install|backup|back up)",
        ),
    ),
    _Rule(
        Category.TASK,
        WEAK,
        _en(
            r"should",
            r"would like to",
            r"every (?:\w+ )?(?:days?|weeks?|months?)",
            r"want to",
            r"let'?s",
            r"tomorrow",
            r"tonight",
            r"next (?:week|month|time)",
            r"this (?:weekend|afternoon|evening)",
            r"appointment",
            r"meeting",
            r"asap",
            rf"(?:on|this|next) {_WEEKDAYS}",
        ),
    ),
    _Rule(
        Category.TASK,
        STRONG,
        _zh(
            r"待办",
            r"提醒我",
            r"别忘了",
            r"不要忘了",
            r"记得\s*(?:要|去|把|帮|在|给|买|带|交|提醒|跟|和|打|[A-Za-z])",
            r"截止",
            r"任务清单",
        ),
    ),
    _Rule(
        Category.TASK,
        MEDIUM,
        _zh(
            # Not "不需要" / "不必须": a negated need is not a task.
            r"(?<!不)需要",
            r"(?<!不)必须",
            r"务必",
            r"下一步|接下来",
            r"得(?:去|做|把|交|写|买|在|赶紧|先|给|跟|和|找)",
            r"要(?:去|做|交|写|买|准备|提交|完成|记得|把)",
            r"计划",
            r"打算",
            r"安排",
            r"任务",
            r"尽快",
            r"之前(?:完成|提交|交)",
            r"帮我",
            r"预约",
            r"预订",
            r"订(?:票|酒店|机票|餐厅|位|一|个|张|间|桌)",
            r"明天",
            r"后天",
            r"下(?:周|个月|星期|次)",
        ),
    ),
    _Rule(
        Category.TASK,
        WEAK,
        _zh(
            r"准备",
            r"今晚",
            r"待会",
            r"回头",
            r"开(?:个)?会",
            r"(?:\d+|[二三四五六七八九十两]|十[一二])点",
            r"应该",
            r"要",
            r"(?:周|星期)[一二三四五六日天末]",
            r"一下",
            r"每\S{0,2}(?:天|周|月)",
        ),
    ),
    # ---------------------------------------------------------------- progress
    _Rule(
        Category.PROGRESS,
        STRONG,
        _en(
            r"(?:i|we|i'?ve|we'?ve|just|finally|already|have|has|had) "
            r"(?:just |finally |already |now )?"
            r"(?:finished|completed|shipped|deployed|released|merged|fixed|resolved|launched|"
            r"submitted|closed|wrapped up|passed|pushed|migrated|installed|cleared)",
            r"(?:is|are|'s|was|were|has been|have been) (?:now |all |finally )?"
            r"(?:done|finished|complete|completed|live|fixed|up and running|submitted|merged|"
            r"deployed|resolved|sent|paid|ready)",
            r"done with",
            r"made (?:some |good |great |real |a lot of )?progress",
            r"(?:still |currently |now )working on",
            r"got (?:it|them|this|that|\w+) (?:working|running|done|fixed)",
            r"managed to",
            r"checked off",
            r"crossed off",
            r"wrapped up",
            r"going (?:well|great|smoothly)|on track",
        ),
    ),
    _Rule(
        Category.PROGRESS,
        MEDIUM,
        _en(
            r"finished",
            r"completed",
            r"shipped",
            r"deployed",
            r"released",
            r"merged",
            r"resolved",
            r"launched",
            r"migrated",
            r"passed (?:the|my|our|its|their)",
            r"(?:\w+) to go",
            r"(?:only|just) .{1,20}? (?:left|missing|remaining)",
            r"progress",
            r"halfway",
            r"(?:almost|nearly|half) (?:done|there|finished)",
            r"so far",
            r"milestone",
            r"update:",
            r"streak",
            # A past-tense verb opening a sentence, subject dropped: "Fixed the test".
            _SENT_START + r"(?:fixed|finished|completed|shipped|deployed|merged|lost|ran|got|moved|"
            r"migrated|submitted|wrapped|cleaned|wrote|built|passed|booked|paid|sent|cut|"
            r"reduced|published|uploaded|pushed)",
            r"(?:days|weeks|months|years) into",
            r"day \d+",
            r"\d+ (?:of|out of) (?:the |my )?\d+",
        ),
    ),
    _Rule(Category.PROGRESS, MEDIUM, _any(r"\d+ ?[%％]")),
    _Rule(
        Category.PROGRESS,
        WEAK,
        _en(
            r"working on",
            r"done",
            r"already",
            r"(?:lost|gained|ran|walked|read|wrote) \d+",
            r"in a row",
            r"status",
            r"passing",
            r"works now",
        ),
    ),
    _Rule(
        Category.PROGRESS,
        STRONG,
        _zh(
            r"完成了",
            r"已完成",
            r"已经完成",
            r"(?:做|写|改|搞|弄|修|跑|看|读|学|考|交|整理|重构)(?:完|好|通|过)了",
            r"搞定",
            r"上线了",
            r"部署(?:好)?了",
            r"发布了",
            r"提交了",
            r"解决了",
            r"通过了",
            r"结束了",
        ),
    ),
    _Rule(
        Category.PROGRESS,
        MEDIUM,
        _zh(
            r"进展",
            r"进度",
            r"正在",
            r"一半",
            r"差不多(?:了|完|好)",
            r"第[\d一二三四五六七八九十百]+天",
            r"(?:部署|发布|迁移?|搬|合|提交|推|上传|压)(?:到|进|完|好)",
            r"[跑做写看读学改]完",
            r"(?:看|读|跑|写|学|做|走|游)了\s*[\d一二三四五六七八九十百千]+",
            r"(?:还|正)在(?:写|做|改|弄|搞|调|跑|学)",
            r"顺利",
            r"过了\S{0,8}(?:审核|考试|面试|评审|验收)|(?:审核|考试|面试|评审|验收)(?:通过|过了)",
            r"到第[\d一二三四五六七八九十]+(?:阶段|章|关|级|周|天|课)",
            r"(?:没|不)再(?:出现|报错|复现)",
            r"坚持了",
            r"(?:瘦|减|跑)了",
            r"已经",
        ),
    ),
    _Rule(Category.PROGRESS, WEAK, _zh(r"完成", r"目前", r"连续", r"终于")),
    # ---------------------------------------------------------------- question
    # A closing question mark is strong; one inside the text (a question among other
    # sentences) is medium. The lookahead keeps one "?" from counting twice.
    _Rule(Category.QUESTION, STRONG, _any(r"[?？]\s*$")),
    _Rule(Category.QUESTION, MEDIUM, _any(r"[?？](?!\s*$)")),
    _Rule(
        Category.QUESTION,
        STRONG,
        _en(
            r"do you (?:know|think|remember|have)",
            r"what do you think",
            r"any (?:ideas?|tips|suggestions|recommendations|thoughts)",
        ),
    ),
    _Rule(
        Category.QUESTION,
        MEDIUM,
        _en(
            _SENT_START + r"(?:what(?! an? )|how|why|which|who|whom|whose|where|when)(?:'s|'re)?",
            r"i wonder",
            r"wondering",
            r"(?:not sure|curious) (?:if|whether|how|what|why|about)",
            r"(?:can|could) you (?:tell|explain|recommend|suggest|help)",
        ),
    ),
    _Rule(
        Category.QUESTION,
        WEAK,
        _en(
            _SENT_START + r"(?:is|are|do|does|did|can|could|would|should|will|shall|have|has|"
            r"isn'?t|aren'?t|don'?t|doesn'?t)",
        ),
    ),
    _Rule(
        Category.QUESTION,
        STRONG,
        _zh(
            r"吗\s*[?？!！。.]?\s*$",
            r"呢\s*[?？]?\s*$",
            r"请问",
            r"能不能",
            r"可不可以",
            r"会不会",
            r"行不行",
            r"好不好",
            r"对不对",
            r"是不是",
            r"要不要",
            r"用不用",
            r"有没有",
            r"能否",
            r"是否",
        ),
    ),
    _Rule(
        Category.QUESTION,
        MEDIUM,
        _zh(
            r"为什么",
            r"为啥",
            r"怎么(?:办|样|做|弄|回事)?",
            r"如何",
            r"哪(?:个|里|儿|些|种|家|天|位)",
            r"多少",
            r"几(?:点|个|天|号|次|岁)",
            r"什么",
            # A 吗 that does not end the sentence; a final one is counted above.
            r"吗(?!\s*[?？!！。.]?\s*$)",
            r"求推荐",
            r"推荐一下",
        ),
    ),
    # ---------------------------------------------------------------- note
    _Rule(
        Category.NOTE,
        STRONG,
        _en(
            r"note (?:that|down|this)",
            r"(?:please )?remember (?:that|this|my|our|the)",
            r"keep in mind",
            r"bear in mind",
            r"for the record",
            r"for future reference",
            r"just so you know",
            r"worth noting",
            r"heads up",
            r"fyi",
            r"for your information",
            r"(?:make|take) a note",
            r"(?:write|jot) (?:it |this |that )?down",
            r"save this",
            r"(?:my|our) (?:\w+(?:'s)? )?(?:address|phone|number|email|birthday|password|wi-?fi|"
            r"anniversary|passport|blood type|size|pin|license plate)(?: number)? (?:is|are|ends)",
            r"(?:is|am|are|i'?m) allergic",
            r"diabetic|diabetes|asthma(?:tic)?|pregnant|epilep\w+",
            r"allergic to",
        ),
    ),
    # Label-style prefixes: "Note: …", "Important：…".
    _Rule(Category.NOTE, STRONG, _en(r"(?:note|important|reminder|tip|nb)\s*[:：]")),
    _Rule(Category.NOTE, STRONG, _zh(r"(?:备忘|备注|注意|记一下|记住|提醒|重要)\s*[:：]")),
    _Rule(
        Category.NOTE,
        MEDIUM,
        _en(
            r"be careful",
            r"careful",
            r"watch out",
            r"beware",
            r"caution",
            r"warning",
            r"(?:never|don'?t ever) (?:commit|share|push|give|eat|use)",
            r"important",
            r"by the way",
            r"btw",
            r"(?:lives|live|works|work|born) (?:in|at)",
            r"medications?|medicine|pills|\d+ ?mg",
            r"password|passcode|login|admin|serial number|account number",
            r"(?:code|pin|password|combination) is",
            r"intolerant|allergy|vegetarian|vegan",
            # A statement about one's own things or people: "My shoe size is 43".
            r"(?:my|our) (?:\w+(?:'s)? )?\w+ (?:is|are) ",
        ),
    ),
    _Rule(
        Category.NOTE,
        WEAK,
        _en(
            r"remember",
            # Where things are kept: "The spare key is in the blue box".
            r"(?:is|are|'s) (?:kept |stored )?(?:in|under|behind|inside|next to|on) (?:the|my|our)",
            r"my (?:wife|husband|son|daughter|mom|mother|dad|father|sister|brother|partner|kid|"
            r"boss|dog|cat)",
        ),
    ),
    _Rule(
        Category.NOTE,
        STRONG,
        _zh(
            r"注意",
            r"记住",
            r"记一下",
            r"记下(?:来)?",
            r"记录一下",
            r"备注",
            r"备忘",
            r"供参考",
            r"留个底",
            r"存一下",
            r"过敏|糖尿病|高血压|哮喘|怀孕",
            r"(?:我|我们)的\w{0,6}(?:生日|地址|电话|邮箱|密码|手机号|车牌|身份证|护照|血型)"
            r"\w{0,4}(?:是|在)",
        ),
    ),
    _Rule(
        Category.NOTE,
        MEDIUM,
        _zh(
            r"重要",
            r"小心",
            r"当心",
            r"务必",
            r"千万(?:别|不要)",
            r"提醒一下",
            r"顺便(?:说|提)",
            r"生日是",
            r"住在",
            r"在\w{1,6}(?:上班|工作|办公)",
            r"留意",
            r"(?:停|放|存|挂|锁)在",
            r"名字(?:是|叫)",
            r"我\S{0,3}的[\u4e00-\u9fff]{1,6}是",
            r"密码|账号",
            r"[\d.]+\s*(?:毫克|mg)|药",
        ),
    ),
    _Rule(
        Category.NOTE,
        WEAK,
        _zh(
            r"(?:在|放在)\S{1,10}(?:里|上|下|旁边)",
            r"我(?:老婆|老公|妻子|丈夫|儿子|女儿|妈|爸|父亲|母亲|哥|姐|弟|妹|老板|家)",
        ),
    ),
)


_LATIN_RE: Final = re.compile(r"[A-Za-z]")


def _evidence(text: str) -> dict[Category, float]:
    lowered = text.lower()
    # Skip a whole script's rules when the text has none of its letters.
    targets = {
        _Script.LATIN: lowered if _LATIN_RE.search(text) else None,
        _Script.CJK: text if has_han(text) else None,
        _Script.ANY: text,
    }
    scores = dict.fromkeys(Category, 0.0)
    for rule in _RULES:
        target = targets[rule.pattern.script]
        if target is None:
            continue
        hits = 0
        for _ in rule.pattern.regex.finditer(target):
            hits += 1
            if hits > _MAX_REPEATS:
                break
        if hits:
            scores[rule.category] += rule.weight * (1 + _REPEAT_FACTOR * (hits - 1))
    return scores


def classify_category(text: str, *, small_talk: bool | None = None) -> CategoryResult:
    """Classify text into one memory category with a confidence in [0, 1].

    Works on English, Chinese and mixed text. Pure small talk and text without enough
    evidence for any category come back as ``general``.

    Args:
        text: a message or a chunk of several messages.
        small_talk: whether the text is small talk, when the caller already knows;
            computed with :func:`is_small_talk` otherwise.

    Returns:
        The winning category, its confidence, and the evidence of every category.

    Example:
        >>> classify_category("我们决定使用 LanceDB").category
        <Category.DECISION: 'decision'>
    """
    scores = _evidence(text)
    public_scores = {category.value: round(score, 2) for category, score in scores.items()}

    if small_talk is None:
        small_talk = is_small_talk(text)
    if small_talk:
        return CategoryResult(Category.GENERAL, _CONFIDENCE_SMALL_TALK, public_scores)

    best = max(_PRIORITY, key=lambda category: scores[category])  # max keeps the first tie
    top = scores[best]
    if top == 0:
        return CategoryResult(Category.GENERAL, _CONFIDENCE_NO_SIGNAL, public_scores)
    if top < _MIN_EVIDENCE:
        return CategoryResult(Category.GENERAL, _CONFIDENCE_WEAK_SIGNAL, public_scores)

    share = top / sum(scores.values())
    saturation = 1 - math.exp(-top / _SATURATION)
    return CategoryResult(best, round(share * saturation, 3), public_scores)


# A memory's text is its messages rendered "role: content", one a line (app/store/chunker.py);
# the label is ours, not the speaker's words.
_ROLE_LABEL_RE: Final = re.compile(r"^(?:user|assistant|system|tool): ")


def line_categories(text: str, main: Category) -> tuple[Category, ...]:
    """Every category the lines of a text have, `main` (the whole text's) first.

    A memory is several messages; the whole text gets one category, but a decision beside
    a reminder is a decision too. The others follow by the evidence of the lines they won,
    ties in the usual priority. Lines without a category (``general``, small talk) add none.

    Example:
        >>> line_categories("user: 下周二上午我要去体检\nuser: We decided to use LanceDB.",
        ...                 Category.TASK)
        (<Category.TASK: 'task'>, <Category.DECISION: 'decision'>)
    """
    lines = text.splitlines()
    if len(lines) < 2:
        return (main,)
    evidence: dict[Category, float] = {}
    for line in lines:
        result = classify_category(_ROLE_LABEL_RE.sub("", line))
        if result.category is not Category.GENERAL:
            won = result.scores[result.category.value]
            evidence[result.category] = evidence.get(result.category, 0.0) + won
    others = sorted((c for c in evidence if c is not main),
                    key=lambda c: (-evidence[c], _PRIORITY.index(c)))
    return (main, *others)
