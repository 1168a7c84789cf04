"""Word lists and patterns behind the task and emotion dimensions (English and Chinese).

Kept apart from the scoring formulas so that a deployment can read, and a reviewer can
check, exactly which words move a score.
"""

from __future__ import annotations

import re
from typing import Final

from app.classify.stopwords import word_set

# --- emotion --------------------------------------------------------------------------

# Words that name or show a feeling. Inflected English forms are listed: there is no
# stemmer here, and a list is easier to audit than suffix rules. Words that are mostly
# used otherwise ("moved", "lost", "content", "safe") are left out.
EN_EMOTION: Final = word_set(
    """
    love loved loving lovely adore adored hate hated hating happy happier happiest glad
    joy joyful delighted thrilled excited exciting excitement amazing awesome wonderful
    fantastic grateful thankful proud blessed relieved sad sadder saddest unhappy sorrow
    upset cry cried crying tears heartbroken lonely depressed depression miserable angry
    anger furious mad annoyed annoying frustrated frustrating frustration irritated
    afraid scared fear fears terrified worried worry worrying anxious anxiety nervous
    panic stressed stress stressful overwhelmed exhausted tired hurt hurts painful pain
    ashamed embarrassed guilty jealous disappointed disappointing hopeless helpless
    desperate devastated shocked horrible terrible awful disgusting grief grieving
    mourning hopeful inspired inspiring touching passionate emotional overjoyed ecstatic
    cheerful comforted
    """
)
ZH_EMOTION: Final = (
    "开心", "高兴", "快乐", "幸福", "兴奋", "激动", "感动", "感激", "感谢", "欣慰", "满足", "自豪",
    "骄傲", "喜悦", "愉快", "爱", "喜欢", "恨", "讨厌", "难过", "伤心", "悲伤", "痛苦", "委屈",
    "哭", "流泪", "孤独", "寂寞", "失落", "沮丧", "郁闷", "抑郁", "绝望", "崩溃", "生气", "愤怒",
    "气死", "烦", "烦躁", "恼火", "害怕", "恐惧", "担心", "焦虑", "紧张", "不安", "慌", "压力",
    "累", "疲惫", "心累", "失望", "后悔", "内疚", "羞愧", "尴尬", "嫉妒", "无助", "心疼", "心碎",
    "受不了", "太好了", "糟糕", "可怕", "恶心", "震惊", "感恩", "温暖", "安心", "放心",
)
EN_INTENSIFIERS: Final = word_set("so very really extremely totally absolutely incredibly super")
ZH_INTENSIFIERS: Final = ("非常", "特别", "太", "超级", "好", "真", "十分", "极其", "简直")
EMOJI_RE: Final = re.compile(
    "[\U0001f300-\U0001faff\U00002600-\U000027bf\U0001f000-\U0001f2ff]"
)
EXCLAMATION_RE: Final = re.compile(r"[!！]+")
# Shouting: an all-capitals English word of three or more letters ("NEVER", "WOW").
CAPS_RE: Final = re.compile(r"(?<![A-Za-z])[A-Z]{3,}(?![A-Za-z])")
# Acronyms in capitals are not shouting.
NOT_SHOUTING: Final = word_set(
    """
    API APIS SQL URL HTTP HTTPS JSON YAML CPU GPU RAM SSD AWS GCP LLM FTS CEO CTO USA NYC
    LGBTQ LGBT PDF FAQ ETA TBD ASAP BTW IMO OMG LOL UTC GMT
    """
)

# --- task relevance --------------------------------------------------------------------

# Requests, obligations, reminders: the text asks for something to be done.
IMPERATIVE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:please|pls|remember to|don't forget|do not forget|make sure|need to|"
    r"needs to|have to|has to|must|should|todo|to-do|action item|deadline|due|remind me|"
    r"let's|follow up|schedule|book|submit|deliver|fix|deploy|send|call|buy|finish)"
    r"(?![A-Za-z])"
    r"|请|务必|一定要|记得|别忘了|不要忘|需要|必须|应该|得要|提醒我|待办|截止|交付|安排|预约|提交"
    r"|完成|修复|部署|发送|购买|跟进",
    re.IGNORECASE,
)
# Numbers, times and dates: concrete facts an assistant is asked to recall.
NUMBER_DATE_RE: Final = re.compile(
    r"\d+(?:[.:/-]\d+)*"
    r"|(?<![A-Za-z])(?:today|tomorrow|tonight|yesterday|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|january|february|march|april|june|july|august|september|"
    r"october|november|december|next week|last week|next month|this weekend)(?![A-Za-z])"
    r"|[一二三四五六七八九十两百千万]+(?:点|号|日|月|年|个|次|天|周|小时|分钟|块|元)"
    r"|今天|明天|后天|昨天|今晚|下周|上周|周[一二三四五六日末]|星期[一二三四五六日天]|下个月|月底|年底",
    re.IGNORECASE,
)

# --- urgency ----------------------------------------------------------------------------
# Closed classes, not examples: what makes a moment urgent is a near time together with
# something at stake. Each class is matched once per line (its presence, not its count).

# A near time: now, today, tonight, tomorrow, within hours, or a clock time with "before".
IMMINENT_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:right now|right away|immediately|asap|urgently|today|tonight|"
    r"tomorrow|this (?:morning|afternoon|evening)|within (?:an?|the|\d+) (?:hour|minute|day)s?|"
    r"in \d+ (?:minutes?|hours?)|by \d{1,2}(?::\d\d)? ?(?:am|pm)|just now)(?![A-Za-z])"
    r"|现在|马上|立刻|立即|尽快|赶紧|赶快|今天|今晚|今早|明天|明早|明晚|刚刚|刚才|小时内|分钟内"
    r"|[\d一二三四五六七八九十两]+点(?:半|钟)?(?:之?前|以前)",
    re.IGNORECASE,
)
# A deadline further away: a date with "by/before/until/due", a 截止 or …前.
DEADLINE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:deadline|due|by|before|until|no later than)(?![A-Za-z])"
    r"|截止|之前|以前|前交|前完成",
    re.IGNORECASE,
)
OBLIGATION_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:must|have to|has to|had to|need to|needs to|got to|gotta|required to)"
    r"(?![A-Za-z])|必须|务必|一定要|非得|只能|不得不",
    re.IGNORECASE,
)
# Something lost, broken, failing or dangerous.
TROUBLE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:lost|lose|losing|missing|stolen|stole|broken|broke down|crashed|"
    r"crashing|is down|went down|outage|failed|failing|emergency|urgent|accident|injured|"
    r"bleeding|ambulance|fever|police|flood|cancell?ed|evicted|fired|"
    r"overdue|locked out)(?![A-Za-z])"
    r"|丢了|丢失|弄丢|被偷|偷了|坏了|崩了|宕机|挂了|出事|事故|紧急|急诊|发烧|受伤|流血|报警"
    r"|救命|着火|失火|失败|取消了|被开除|来不及|出问题|故障|投诉|赔钱|违约",
    re.IGNORECASE,
)
# What happens if not: the stakes said out loud.
CONSEQUENCE_RE: Final = re.compile(
    r"(?<![A-Za-z])(?:otherwise|or else|or we|or i|or they|or it|if not|unless)(?![A-Za-z])"
    r"|不然|否则|要不然|要不就|就完了|就麻烦了",
    re.IGNORECASE,
)
# Feelings of distress: the negative part of the emotion lexicon above.
EN_DISTRESS: Final = word_set(
    """
    sad upset cry cried crying tears heartbroken lonely depressed miserable angry furious
    afraid scared fear terrified worried worrying anxious anxiety nervous panic panicking
    stressed overwhelmed hurt painful pain desperate devastated shocked horrible terrible
    awful hopeless helpless grief
    """
)
ZH_DISTRESS: Final = (
    "难过", "伤心", "悲伤", "痛苦", "哭", "流泪", "绝望", "崩溃", "生气", "愤怒", "害怕", "恐惧",
    "担心", "焦虑", "紧张", "不安", "慌", "受不了", "糟糕", "可怕", "震惊", "无助", "心碎", "急死",
)
