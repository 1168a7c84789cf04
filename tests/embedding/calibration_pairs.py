"""Questions and the memories that answer them, written for calibrating a model's cosine
scale (app/embedding/profiles.py); none comes from evaluation data.

Memory `i` answers question `i`; every other memory is unrelated to it. Half are single
notes, half are stretches of a two-person chat in the shape a chat client stores ("user:" /
"assistant:" lines, each opening with the speaker's name) or all as `user` (an import),
because recall compares a *question* (e5's "query: " side) with *stored text* ("passage: "),
and a chat chunk of several lines scores lower against a question than a one-line note.
"""

from __future__ import annotations

PAIRS: list[tuple[str, str]] = [
    # English notes
    ("When is my dentist appointment?",
     "user: The dentist appointment moved to Thursday at 9am."),
    ("Where does my sister live?",
     "user: My sister Anna lives in Lisbon and works as a nurse."),
    ("What instrument am I learning?",
     "user: I started learning the cello last spring, mostly Bach suites."),
    ("Which database did we choose for the project?",
     "user: We picked Postgres for the billing project because the team knows it well."),
    # English chats
    ("What did Omar cook for the neighbours?",
     "user: Priya: How was the weekend?\n"
     "assistant: Omar: Busy! I made a huge pot of lentil soup for the neighbours.\n"
     "user: Priya: That's so kind, did they like it?\n"
     "assistant: Omar: They asked for the recipe, so I guess so."),
    ("When did Jonas start his new job?",
     "user: Lena: Jonas, congratulations again on the new position!\n"
     "assistant: Jonas: Thanks! I started at the bike shop last Monday.\n"
     "user: Lena: Do you like the people there?\n"
     "assistant: Jonas: They are great, and I get a discount on parts."),
    ("Why did Mia stop running?",
     "user: Mia: I haven't been running since March, my knee started hurting.\n"
     "user: Tom: Oh no, did you see a doctor?\n"
     "user: Mia: Yes, she said to rest it for a couple of months and swim instead.\n"
     "user: Tom: Swimming is nice too, at least you keep moving."),
    ("What pet does Sam want to adopt?",
     "user: Sam: I've been visiting the shelter every Saturday.\n"
     "assistant: Noor: Are you thinking of getting a dog?\n"
     "user: Sam: Actually a cat, there's a grey one called Pebble I really like.\n"
     "assistant: Noor: Pebble is a cute name!"),
    # Chinese notes
    ("我的体检是哪天？", "user: 体检改到下周四上午了，前一天晚上不能吃东西。"),
    ("我家的猫叫什么名字？", "user: 我家的猫叫小白，今年三岁了，特别怕打雷。"),
    ("我在哪里上班？", "user: 我在一家银行做柜员，每天九点上班。"),
    ("周末我们去哪儿玩了？", "user: 周末我们去爬了香山，看到了很多红叶。"),
    # Chinese chats
    ("小林为什么搬家？",
     "user: 小林: 我下个月要搬到杭州了。\n"
     "assistant: 阿梅: 这么突然？是工作的原因吗？\n"
     "user: 小林: 对，公司在杭州开了新的分部，让我过去带团队。\n"
     "assistant: 阿梅: 那恭喜你啊，升职了！"),
    ("王磊的女儿学什么乐器？",
     "user: 王磊: 我女儿最近开始学小提琴了。\n"
     "assistant: 陈静: 真好，每周上几次课？\n"
     "user: 王磊: 两次，周三和周六，她自己练得也很认真。\n"
     "assistant: 陈静: 坚持下去一定会拉得很好。"),
    ("张阿姨的手术怎么样了？",
     "user: 刘洋: 张阿姨的膝盖手术做完了吗？\n"
     "user: 赵敏: 做完了，很顺利，医生说两周后就能下地走路。\n"
     "user: 刘洋: 太好了，替我问候她。\n"
     "user: 赵敏: 好的，她一定很高兴。"),
    ("李娜打算去哪里旅行？",
     "user: 李娜: 今年国庆我想去云南，大理和丽江都想看看。\n"
     "assistant: 周杰: 我去年去过大理，洱海特别美。\n"
     "user: 李娜: 那你推荐住哪里？\n"
     "assistant: 周杰: 住古城附近吧，走路就能到很多地方。"),
]

# A question in one language about a memory in the other (memory `i` of PAIRS answers it).
CROSS_LINGUAL: list[tuple[str, int]] = [
    ("我姐姐住在哪里？", 1),
    ("我在学什么乐器？", 2),
    ("Omar 给邻居做了什么菜？", 4),
    ("What is my cat called?", 9),
    ("Where do I work?", 10),
    ("Where did we go hiking at the weekend?", 11),
]
