"""Query terms and how much of a query a memory covers, in English and Chinese.

The full-text index ranks keyword hits (BM25) but its scores have no fixed scale: they grow
with the namespace and the query length. Recall needs a keyword score that means the same
thing everywhere, so that one `min_score` works for every store. `coverage` gives it: the
share of the query's information (IDF-weighted terms) that a memory contains, 0–1.

Terms: English words lower-cased, lightly stemmed, function words dropped; Chinese words
from jieba's search-mode segmentation (a compound and its parts), single characters and
function words dropped; plus the words jieba's HMM puts together where the dictionary left
single characters, mostly names (`QueryTerms.guessed`; without them "宋嘉树和林婉清谁更年长"
has no term but 年长). Chinese terms are matched as substrings of the memory text, so a
different segmentation of the same words on the two sides never hides a match. IDF is
taken over the candidate memories of this query (the only corpus at hand without another
query): a term found in every candidate (a speaker's name in a two-person chat) weighs
nothing; a term found in none weighs like a rare term and lowers every memory's coverage:
the query may ask about something the store does not hold.

With `equivalents`, a query's attribute word also matches the other words of its group
(`_EQUIVALENT_GROUPS`: 年龄 ~ 岁, 教育背景 ~ 学历, birthday ~ born), the paraphrases a user
makes most between stating a fact and asking about it, and a kind of thing matches the
things of that kind (`_KIND_MEMBERS`: 家电 finds 洗碗机, phone finds Pixel; not the reverse).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import jieba

from app.classify.entities import warm_up
from app.classify.stopwords import word_set

_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_LATIN_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_NUMBER_WITH_UNIT = re.compile(r"(\d{2,})[a-z]{1,3}")
_AGE = re.compile(r"[\d零一二两三四五六七八九十]\s*岁")
_NUMBER_TERM = re.compile(r"\d+|[零一二两三四五六七八九十百千万亿]+[人岁天个周年月次场位]?")

# Function words only: unlike the classifier's list, words such as "decided", "tomorrow"
# or "需要" can be exactly what a recall asks about.
_EN_STOP = word_set("""
a an the and or but if of to in on at by for with from as is are was were be been being
do does did done have has had having i you he she it we they me him her us them my your
his its our their this that these those what when where which who whom whose why how not
no so than too very can could will would should shall may might must just also about into
over after before up down out off then once here there all any both each few more most
other some such only own same s t d ll m re ve yes oh ok okay well really like get got
gets go going went lot much many ever anything something thing things kind one ones
tell told know think say said remember recall again
""")
_ZH_STOP = word_set("""
的 了 是 在 我 你 他 她 它 我们 你们 他们 她们 这 那 这个 那个 这些 那些 哪 哪个 哪些
哪天 哪里 什么 怎么 怎么样 为什么 吗 呢 吧 啊 呀 哦 嗯 和 与 跟 及 或 或者 就 都 也 还
又 很 太 最 更 一个 一些 有 没有 没 不 要 会 能 可以 对 把 被 给 让 从 到 向 上 下 中
里 个 们 着 过 得 地 之 其 而 并 但 但是 如果 因为 所以 是不是 有没有 多少 几 请问 请
一下 告诉 知道 记得 还记得 问 问题 想 想问 说 说过 之前 以前 刚才 上次
""")


# Ways to name the same personal attribute or relative, which the bundled English-centred
# model cannot tell are related in Chinese ("我姑妈多大了" vs "我的姑妈今年六十一岁了"). A
# query term in a group matches a memory holding any word of its group. Kept to what people
# state about themselves and others, where the words differ but the question is the same.
_EQUIVALENT_GROUPS = """
年龄 年纪 多大 岁 年轻 年长
名字 姓名 名叫 叫
家乡 老家 籍贯 来自 老乡 哪里人 哪儿人 哪里的人 哪儿的人
电话 手机号 手机号码 联系电话 电话号码 号码 联系方式
邮箱 邮箱地址 电子邮件 邮件
学历 教育背景 毕业 专科 大专 本科 硕士 博士 研究生
爱好 兴趣 兴趣爱好 喜欢
身高 多高 厘米 cm
生日 过生日 出生
单位 工作单位 公司
父亲 爸爸 老爸
母亲 妈妈 老妈
丈夫 老公
妻子 老婆 媳妇
上司 领导 老板
age old young
father dad
mother mommy
孩子 小孩 儿子 女儿
kid child children daughter
husband hubby
boss manager supervisor
birthday born
phone number mobile
email mail
hobby hobbies enjoy
hometown grew
"""
# A kind of thing and the things of that kind people name instead ("我用的家电" asked,
# "我家用的是博世洗碗机" stated; "my phone" asked, "my new Pixel" stated). One way only: the
# kind matches its members, a member does not match the other members.
_KIND_MEMBERS = """
家电: 洗衣机 洗碗机 冰箱 空调 电视机 吸尘器 扫地机 空气净化器 净化器 加湿器 除湿机 微波炉 烤箱
  电饭煲 电磁炉 热水器 净水器 油烟机 燃气灶 消毒柜 电风扇 取暖器 吹风机 豆浆机 榨汁机 破壁机
  料理机 咖啡机 空气炸锅 洗地机 干衣机 烘干机 投影仪
美妆: 化妆品 护肤品 口红 唇膏 唇釉 粉底 气垫 精华液 面霜 眼霜 乳液 面膜 爽肤水 化妆水 防晒 卸妆
  洗面奶 洁面 眼影 睫毛膏 眉笔 腮红 香水 散粉 粉饼 遮瑕 隔离霜 精油 护发素 喷雾 身体乳 护手霜
手机: iphone 华为 小米 红米 荣耀 oppo vivo 三星 一加 魅族 realme 真我 努比亚 pixel
运动鞋: 跑鞋 球鞋 篮球鞋 板鞋 耐克 nike 阿迪达斯 adidas 新百伦 安踏 李宁 特步 匹克 亚瑟士 asics
  彪马 puma 斯凯奇 匡威 万斯
景区: 景点 风景区 公园 乐园 古镇 寺庙 博物馆 故宫 长城 海滩 度假区
商场: 超市 购物中心 商城 百货 万达 大润发 沃尔玛 家乐福 山姆
职业: 警察 医生 护士 教师 老师 工程师 律师 会计 厨师 司机 程序员 设计师 销售 柜员 翻译 记者
  工人 快递员 外卖员 服务员 店员 公务员 军人 消防员 保安 保洁 主管 经理 总监 秘书 编辑 作家
  画家 演员 歌手 摄影师 导游 飞行员 空姐 乘务员 药剂师 营养师 分析师 建筑师 律师助理 研究员
家人/家里人/家庭: 孩子 儿子 女儿 老公 老婆 丈夫 妻子 父母 爸爸 妈妈 哥哥 姐姐 弟弟 妹妹 爷爷 奶奶
  外公 外婆
family: kid child children daughter husband wife parent mother father dad brother sister
  grandma grandpa grandmother grandfather
appliance: dishwasher fridge refrigerator freezer microwave oven washer dryer vacuum purifier
  humidifier kettle toaster blender heater
phone: iphone pixel galaxy android
makeup/cosmetic: lipstick foundation mascara serum moisturizer concealer blush eyeliner perfume
sneaker: nike adidas asics puma reebok converse vans
job/occupation: nurse doctor teacher engineer lawyer accountant chef cook driver programmer
  developer designer cashier translator journalist firefighter officer pilot pharmacist
  architect
"""


def _parse_groups() -> dict[str, tuple[str, ...]]:
    forms: dict[str, tuple[str, ...]] = {}
    for line in _EQUIVALENT_GROUPS.strip().splitlines():
        group = tuple(line.split())
        for word in group:
            forms[word] = group
    for kinds, members in re.findall(r"^(\S+):((?:.*\n?)(?:^ +.*\n?)*)",
                                     _KIND_MEMBERS.strip(), flags=re.MULTILINE):
        for kind in kinds.split("/"):  # "job/occupation": two names of one kind
            forms[kind] = tuple(dict.fromkeys([*forms.get(kind, (kind,)), *members.split()]))
    return forms


_EQUIVALENTS = _parse_groups()

_CJK_EQUIVALENT_WORDS = frozenset(w for w in _EQUIVALENTS if len(w) >= 2 and _CJK_RUN.fullmatch(w))


def _stem(word: str) -> str:
    # A light suffix strip, enough for "researched" ~ "research" and "groups" ~ "group";
    # a real stemmer would buy little here since matching is whole-word on both sides.
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True)
class QueryTerms:
    latin: frozenset[str]  # stemmed English words
    cjk: frozenset[str]  # Chinese words, matched as substrings
    # Chinese words outside the segmenter's dictionary that its HMM put together from single
    # characters: mostly names ("宋嘉树", "星光百货"), sometimes scaffolding ("更高"). They
    # count only where some candidate holds them (`Coverage`).
    guessed: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.latin or self.cjk or self.guessed)

    def without(self, words: frozenset[str]) -> QueryTerms:
        return QueryTerms(latin=self.latin - words, cjk=self.cjk - words,
                          guessed=self.guessed - words)

    def without_numbers(self) -> QueryTerms:
        """The terms without numbers ("40", "五百人"): the values a counting question
        compares against, which the memories it needs mostly do not hold."""
        return self.without(frozenset(
            t for t in self.latin | self.cjk | self.guessed if _NUMBER_TERM.fullmatch(t)))


def latin_words(text: str) -> set[str]:
    words = set()
    for raw in _LATIN_WORD.findall(text.lower()):
        word = raw.split("'")[0]  # "caroline's" -> "caroline"
        if not word or word in _EN_STOP or (word.isdigit() and len(word) < 2):
            continue
        number = _NUMBER_WITH_UNIT.fullmatch(word)
        # "173cm" as 173, which also finds "173厘米" and "173 cm" (terms match word starts).
        words.add(number.group(1) if number else _stem(word))
    return words


def query_terms(text: str) -> QueryTerms:
    """The English and Chinese terms of a query."""
    cjk: set[str] = set()
    guessed: set[str] = set()
    runs = _CJK_RUN.findall(text)
    if runs:
        warm_up()
        for run in runs:
            for word in jieba.cut_for_search(run, HMM=False):
                if len(word) >= 2 and word not in _ZH_STOP:
                    cjk.add(word)
            # The dictionary segmentation leaves a name it does not know as single
            # characters ("宋嘉树和林婉清" → 宋 嘉 树 和 林 婉 清), which carry no term at
            # all. A guess that starts or ends with a function word ("我用", "更高") is the
            # HMM gluing scaffolding together, not a name.
            for word in jieba.cut(run, HMM=True):
                if len(word) >= 2 and word not in _ZH_STOP and word[0] not in _ZH_STOP \
                        and word[-1] not in _ZH_STOP \
                        and word not in cjk and not any(word in w for w in cjk):
                    guessed.add(word)
            # An attribute named in a compound the segmenter splits ("教育背景" → 教育, 背景)
            # counts as one term, not as its parts, so that its equivalents can match.
            named = {w for w in _CJK_EQUIVALENT_WORDS if w in run}
            cjk = {t for t in cjk if not any(t != w and t in w for w in named)} | named
    if _AGE.search(text):  # "40岁以下": the age, though no word names it
        cjk.add("年龄")
    latin = latin_words(_CJK_RUN.sub(" ", text))
    return QueryTerms(latin=frozenset(latin), cjk=frozenset(cjk),
                      guessed=frozenset(guessed - cjk))


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


class Coverage:
    """The IDF-weighted share of the query's terms each of a set of texts contains (0–1).

    Built on the query's candidate memories, which are also the IDF corpus (see the module
    docstring); `share` then scores any other text, such as one line of a memory, with the
    same term weights.
    """

    def __init__(self, terms: QueryTerms, documents: Sequence[str], *,
                 equivalents: bool = False, drop_absent: bool = False) -> None:
        def forms(term: str) -> tuple[str, ...]:
            return _EQUIVALENTS.get(term, (term,)) if equivalents else (term,)

        self._names = [*sorted(terms.latin), *sorted(terms.cjk), *sorted(terms.guessed)]
        self._terms = [(forms(t), False) for t in sorted(terms.latin)] + \
            [(forms(t), True) for t in sorted(terms.cjk)] + \
            [((t,), True) for t in sorted(terms.guessed)]
        first_guessed = len(self._terms) - len(terms.guessed)
        self._latin: re.Pattern[str] | None = None
        if terms.latin:
            # One regex pass per text instead of tokenizing it in Python (the hot spot of a
            # recall): an English term matches a word that starts with it ("research" finds
            # "researched"), which is what the light stemming on the query side aims at.
            words = {w for group, cjk in self._terms if not cjk for w in group}
            alternatives = "|".join(re.escape(t) for t in sorted(words, key=len, reverse=True))
            self._latin = re.compile(rf"(?<![a-z0-9])(?:{alternatives})")
        present = [self._present(d) for d in documents]
        n = len(documents)
        self._weights: list[float] = []
        absent = []
        for i, column in enumerate(zip(*present, strict=True) if present else ()):
            held = any(column)
            if not held:
                absent.append(self._names[i])
            # A term no candidate holds weighs like a rare one, not more: it cannot tell the
            # candidates apart, and it is as often the question's scaffolding ("安排",
            # "scheduled") as something the store lacks. A guessed word no candidate holds
            # weighs nothing (it was no term before the guess), nor does any absent term
            # with `drop_absent` (a counting question's condition: "超过", "以下").
            if (drop_absent or i >= first_guessed) and not held:
                self._weights.append(0.0)
                continue
            df = max(1, sum(column))
            self._weights.append(math.log(1 + (n - df + 0.5) / (df + 0.5)))
        self._total = sum(self._weights)
        self.scores = [self._share(row) for row in present]
        self.absent = frozenset(absent)  # the query's terms no document holds

    def _present(self, text: str) -> list[bool]:
        lowered = text.lower()
        found = set(self._latin.findall(lowered)) if self._latin else set()
        return [any((t in lowered) if cjk else (t in found) for t in group)
                for group, cjk in self._terms]

    def _share(self, row: Sequence[bool]) -> float:
        if self._total <= 0:
            return 0.0
        return sum(w for w, hit in zip(self._weights, row, strict=True) if hit) / self._total

    def share(self, text: str) -> float:
        """The share of the query's terms in `text`, weighted as over the candidates."""
        if not self._weights:
            return 0.0
        return self._share(self._present(text))


def coverage(terms: QueryTerms, documents: Sequence[str]) -> list[float]:
    """For each document, the IDF-weighted share of the query terms it contains (0–1).

    The documents are also the IDF corpus (see the module docstring). Empty query terms:
    every coverage is 0.
    """
    if not terms or not documents:
        return [0.0] * len(documents)
    return Coverage(terms, documents).scores
