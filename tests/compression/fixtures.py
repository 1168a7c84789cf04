"""Bilingual conversations written for the compression tests (no benchmark data).

`CHATTER_*` sessions are small talk with little task content: the material compression
exists for. `FACTS` holds decisions, dates and requests that must survive. Some contents
carry bytes that a careless round trip would change (emoji, combining accents, tabs, double
spaces, full-width punctuation) so that restore is checked byte for byte.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

CHATTER_EN = [
    "Morning! The sky looked kind of grey on the way in, nothing special though.",
    "Yeah, same here, a slow walk and a coffee, the usual routine really.",
    "I watched a bit of a cooking show last night, they made some soup.",
    "Nice, I mostly scrolled through random videos until I fell asleep.",
    "The neighbour's cat sat on the fence again for most of the afternoon.",
    "Ha, that cat seems to own the whole street by now, honestly.",
    "My tea got cold while I was reading the news, which happens a lot.",
    "Same, I always forget mine on the windowsill and find it hours later.",
    "There was a long queue at the bakery but the bread smelled good.",
    "Bakeries in the morning are the best part of the weekend anyway.",
    "I think it might rain later, the clouds are getting darker now.",
    "Maybe, I didn't check the forecast today, we will see I guess.",
]
CHATTER_ZH = [
    "今天早上天气有点阴，路上人不多，感觉挺安静的。",
    "是啊，我就慢慢走过来，顺便买了杯咖啡，和平时差不多。",
    "昨晚看了一会儿做饭的节目，他们做了一锅汤。",
    "我基本上就是刷刷短视频，然后就睡着了。",
    "邻居家的猫下午又在围墙上坐了很久。",
    "哈哈，那只猫好像已经把整条街当成自己的地盘了。",
    "看新闻的时候茶都凉了，这种事经常发生。",
    "我也是，总把杯子忘在窗台上，过几个小时才想起来。",
    "面包店门口排了很长的队，不过面包闻起来很香。",
    "早上的面包店大概是周末最舒服的地方了。",
]
FACTS = [
    "We decided to move the team wiki to Notion; please export every page by Friday 3pm.",
    "记得下周二上午10点去医院体检，体检前一天晚上8点以后不要吃东西。",
    "Deadline: deliver the PostgreSQL → LanceDB migration plan to Alice before 2025-03-14!",
    "我们决定用 LanceDB 做向量检索，务必在月底前完成部署并备份数据。",
]
# Contents whose bytes must survive compression and restore exactly.
TRICKY = [
    "Tabs\tand  double  spaces, a combining e\u0301 accent, and an emoji 🫖 stay put.",
    "全角标点：“引号”、（括号）和……省略号，还有 ＡＢＣ 全角字母。",
]


def messages(contents: list[str], *, prefix: str, when: datetime | None = None
             ) -> list[dict[str, Any]]:
    """Alternating user/assistant messages with ids `<prefix>-<n>`."""
    out = []
    for i, content in enumerate(contents):
        message: dict[str, Any] = {"msg_id": f"{prefix}-{i}",
                                   "role": "user" if i % 2 == 0 else "assistant",
                                   "content": content}
        if when is not None:
            message["timestamp"] = (when + timedelta(minutes=i)).isoformat()
        out.append(message)
    return out


def days_ago(days: float) -> datetime:
    return datetime.now(UTC) - timedelta(days=days)
