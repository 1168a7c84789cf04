"""Counting questions written to calibrate `ModelProfile.count_threshold_factor`.

Each question asks how many of something; three memories state the attribute it counts,
one of them (at most) with the asked value, the others with another value the user still
needs to see to count ("小李养了一只橘猫" for "几个朋友养了狗"). Written for the purpose,
never taken from evaluation data. The chit-chat is stored beside each question's facts.
"""

from __future__ import annotations

ZH_CHAT = ["今天下午去超市买了水果。", "晚上看了一会儿书。", "明天可能会下雨。",
           "最近总是有点累，想早点睡。"]
EN_CHAT = ["Bought some fruit this afternoon.", "Read a book in the evening.",
           "It may rain tomorrow.", "Feeling a bit tired lately, want to sleep early."]

ZH = [
    ("我有几个朋友养了狗？",
     ["小李养了一只橘猫。", "王芳养了一条金毛。", "老周家里养了两只兔子。"]),
    ("有几个同事住在北京？", ["张伟住在上海浦东。", "刘洋住在北京朝阳。", "陈静住在广州天河。"]),
    ("我去过几次日本？", ["2019年春天去东京看了樱花。", "去年十月去大阪玩了一周。",
                     "前年夏天去韩国首尔旅游。"]),
    ("有几个人每天喝咖啡？", ["阿杰每天早上喝一杯美式咖啡。", "小美只喝绿茶，从不喝咖啡。",
                       "老王最喜欢喝橙汁。"]),
    ("有几个人的生日在夏天？",
     ["表姐的生日是七月十二号。", "小陈的生日在十二月。", "我爸的生日是三月五号。"]),
]
EN = [
    ("How many of my friends have a dog?", ["Priya has a golden retriever.",
                                            "Tom has two cats.", "Lena keeps rabbits at home."]),
    ("How many colleagues live in Berlin?", ["Jonas lives in Munich.", "Clara lives in Berlin.",
                                             "Felix lives in Hamburg."]),
    ("How many times have I been to Japan?", ["In 2019 I visited Tokyo in spring.",
                                              "Last October I spent a week in Osaka.",
                                              "Two summers ago I travelled to Seoul."]),
    ("How many people on the team drink coffee every day?",
     ["Ravi drinks an espresso every morning.", "Mei only drinks green tea, never coffee.",
      "Sam prefers orange juice."]),
    ("How many people have a birthday in summer?", ["My cousin's birthday is on July 12.",
                                                    "Chen's birthday is in December.",
                                                    "My dad's birthday is March 5."]),
]
