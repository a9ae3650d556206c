"""How much a sentence is worth remembering: general signals, each with a weight.

A durable fact is usually a statement (not a question) about the speaker or the people and
things around them, with some content a later search can find: a name, a number, a date, a
place, a relation, a plan or a preference. Chatter ("That's great!", "哈哈", "Thanks, see you")
has none of these. :func:`fact_score` adds the weights of the signals a sentence carries and
returns ``None`` for sentences that are never kept (questions, reactions, too little
content, code and logs, credentials); :data:`KEEP` is the bar a sentence must reach. The
weights are round numbers chosen so that one strong cue ("I prefer", "we decided", "remember
that", 喜欢, 决定) or two ordinary signals (a first-person statement and a date) suffice.

English and Chinese are handled word by word; Japanese and Korean get the script-neutral
signals (numbers, dates, Latin names) and their first-person pronouns.
"""

from __future__ import annotations

import re

from memdir.index._rules import standing_rule
from memdir.models.extractive._extract import cue_kinds, has_cjk
from memdir.models.extractive._extract_dates import has_date_phrase

__all__ = ["KEEP", "fact_score", "is_secret"]

KEEP = 3.0
_STRONG_CUES = frozenset(
    {"remember", "preference", "decision", "person", "deadline", "rule", "standing"}
)
_CUE_WEIGHT = {"fact": 2.0, "commitment": 1.5}

# -- rejection -------------------------------------------------------------------------------

# Never remember credentials, even when asked in passing.
_SECRET = re.compile(
    r"\b(?:sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{12,}|\bapi[_ -]?key\b|\bpassword\b"
    r"|\bpasswd\b|\bsecret\b|\btoken\s*[:=]|密码|口令|密钥",
    re.IGNORECASE,
)
_QUESTION_END = re.compile(r"[?？]\W*$|[吗呢]\W*$|ですか\W*$")
# Code, logs and stack traces pasted into a message: symbols instead of words.
_CODE_LINE = re.compile(r"^(?:at |File \"|Traceback|\$ |>>> |[{}\[\]]|\w+\(.*\)\s*$)")
_SYMBOLS = frozenset("{}[]()<>=;|\\/_$#@*`^~")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+(?:[.,:/-]\d+)*")
_STOP = _words(
    """a an the and or but so to of in on at for with from by about as into onto over than then
    is are was were be been being am do does did doing have has had having it its it's this
    that these those there here i me my mine we us our you your yours he him his she her they
    them their what which who whom how when where why just really very too also not no yes can
    could would should will shall may might must if up out all some any more most much many
    get gets got go goes going gonna lot lots thing things something anything everything stuff
    way like well oh yeah yep yup ok okay sure i'm i've i'd i'll i’m i’ve i’d i’ll that's it's
    you're you've you'd you'll don't can't won't didn't isn't wasn't there's what's let's let
    one even still though only now again ever back bit kind kinda sort sorta pretty quite such
    own same other another each every both either neither whether while because since until
    till though said say says tell told make made time day"""
)
_REACTION = _words(
    """wow cool awesome great amazing nice good glad happy love loved lovely sweet fun exciting
    excited fantastic wonderful incredible beautiful thanks thank congrats congratulations
    haha hahaha lol omg aww yay hey hi hello bye goodbye totally absolutely definitely agree
    true right sounds sound seems hope hopefully proud inspiring stunning gorgeous cute sorry
    hear see talk soon care take luck best bet mean know think feel feels feeling super
    awesome appreciate appreciated interesting impressive brilliant perfect enjoy enjoyed keep
    going thing totally exactly indeed certainly agreed"""
)
_NOT_CONTENT = _STOP | _REACTION
_OPENER = re.compile(
    r"^(?:hi|hey|hello|thanks|thank you|thx|bye|good ?bye|see you|talk (?:to you )?soon|"
    r"good (?:morning|night|evening)|congrats|congratulations|wow|aww+|omg|lol|haha\w*|yay|"
    r"that'?s|that sounds|sounds|it sounds|what a|so (?:cool|great|nice)|you'?re|you'?ve|you)\b",
    re.IGNORECASE,
)
_CJK_FILLER = re.compile(
    r"哈+|呵+|嘿+|嗯+|哦+|啊+|哇+|呀|吧|啦|嘛|呢|好的|好吧|谢谢|多谢|感谢|不客气|没问题|太好了|真棒|"
    r"厉害|不错|加油|恭喜|你好|您好|再见|晚安|早安|拜拜|是的|对啊|对的|确实|真的|可以|好|行|"
    r"[\s\W\d]"
)

# -- signals ---------------------------------------------------------------------------------

_FP_SUBJECT = re.compile(
    r"\b(?:i|we)(?:['’](?:m|ve|d|ll))?\b|\bme and\b"
    # Casual speech drops the "I": "Just got back from Lisbon", "Gonna start a course".
    r"|^(?:just|finally|gonna|going to|been|started|finished|got|went|planning|thinking)\b",
    re.IGNORECASE,
)
_REMEMBER_REQUEST = re.compile(
    r"^(?:(?:please|pls|also|and|oh|btw|fyi)[,\s]+)*(?:remember|don'?t forget|note|keep in mind)"
    r"|\b(?:please|pls) (?:remember|note|keep in mind)\b|记住|记得|别忘|不要忘|备忘",
    re.IGNORECASE,
)
_FP_OTHER = re.compile(r"\b(?:my|our|me|us|mine|ours|myself|ourselves)\b", re.IGNORECASE)
_IRREGULAR = (
    "went|got|made|took|saw|met|bought|found|gave|had|did|came|ran|won|began|wrote|brought|built|"
    "caught|chose|drove|ate|fell|felt|flew|forgot|left|lost|paid|put|sold|sent|sang|sat|slept|"
    "spent|spoke|swam|taught|told|threw|wore|knew|heard|held|kept|led|learnt|rode|grew|hung|"
    "hit|hurt|became|broke|drew|drank|fought|froze|quit|shook|moved|been|gotten|done|taken|"
    "seen|given|begun|written|won"
)
_EVENT = re.compile(
    r"\b(?:i|we|i['’]ve|we['’]ve|i['’]d|we['’]d)\s+(?:(?:just|finally|recently|also|actually|"
    r"already|even|really|both|have|has|had|never|once|all)\s+){0,2}(?:\w+ed|"
    + _IRREGULAR
    + r")\b",
    re.IGNORECASE,
)
_OTHERS_EVENT = re.compile(
    r"\b(?:he|she|they)\s+(?:(?:just|finally|recently|also|actually|already|have|has|had)\s+)?"
    r"(?:\w+ed|" + _IRREGULAR + r")\b",
    re.IGNORECASE,
)
# Habits are durable: "I swim twice a week", "we usually cook on Sundays".
_HABIT = re.compile(
    r"\b(?:usually|often|always|regularly|normally|daily|weekly|every (?:day|week|month|year|"
    r"morning|evening|night|weekend)|(?:once|twice|\w+ times) a (?:day|week|month|year)|a lot)\b",
    re.IGNORECASE,
)
_ACTIVITY = re.compile(
    r"\b(?:i['’]m|i am|we['’]re|we are)\s+(?:\w+\s+)?(?!going\b)\w{3,}ing\b", re.IGNORECASE
)
_PLAN = re.compile(
    r"\b(?:gonna|going to|plan(?:ning|s|ned)? (?:to|on)|want(?:s|ed)? to|hop(?:e|ing) to|"
    r"thinking (?:of|about)|looking forward to|about to|intend(?:ing)? to|aim(?:ing)? to|"
    r"sign(?:ing|ed)? up|sign up|will|['’]ll)\b",
    re.IGNORECASE,
)
_RELATION = re.compile(
    r"\b(?:my|our|his|her|their)\s+(?:(?:little|big|older|younger|elder|best|new|old|late|"
    r"two|three)\s+)?(?:wife|husband|partner|spouse|boyfriend|girlfriend|fianc[ée]e?|sons?|"
    r"daughters?|kids?|child|children|bab(?:y|ies)|mom|mum|mother|dad|father|parents?|"
    r"sisters?|brothers?|siblings?|grand(?:ma|mother|pa|father|parents?|kids?|children|son|"
    r"daughter)|aunt|uncle|cousins?|niece|nephew|family|friends?|bestie|roommates?|"
    r"neighbou?rs?|colleagues?|co-?workers?|boss|manager|team|mentor|teacher|students?|"
    r"doctor|therapist|dogs?|cats?|pupp(?:y|ies)|kittens?|pets?|horse|car|house|home|job)\b"
    r"|(?:我|我们|他|她|咱们)的?(?:妈妈|母亲|爸爸|父亲|父母|妹妹|姐姐|哥哥|弟弟|老婆|老公|妻子|丈夫|"
    r"儿子|女儿|孩子|宝宝|男朋友|女朋友|对象|朋友|同事|老板|上司|下属|领导|室友|邻居|老师|同学|"
    r"奶奶|爷爷|外婆|外公|姥姥|姥爷|叔叔|阿姨|舅舅|舅妈|姑姑|姑父|伯伯|婶婶|表哥|表姐|表弟|表妹|"
    r"堂哥|堂姐|堂弟|堂妹|侄子|侄女|外甥|外甥女|孙子|孙女|家人|狗|猫|宠物)",
    re.IGNORECASE,
)
_NAMING = re.compile(
    r"\b(?i:my|our|his|her|their|its)\s+(?:\w+\s+)?(?i:name(?:['’]s| is| was))\b"
    r"|\b(?:named|called) [A-Z]|名叫|叫做|名字叫",
)
_POSSESSION = re.compile(
    r"\b(?:i|we)\s+(?:have|own|got|bought|adopted|rescued|inherited)\b|\bmy new\b"
    r"|我(?:们)?(?:家)?(?:买了|养了|收养了|领养了|租了)",
    re.IGNORECASE,
)
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|weekends"
_TIME = re.compile(
    # Digits next to CJK characters have no word boundary: (?<!\d) instead of \b.
    r"\b(?:" + _DAYS + r")\b|(?<![\d.])(?:19|20)\d\d(?![\d.])|\b\d{1,2}(?::\d\d)?\s?(?:am|pm)\b"
    r"|(?<!\d)\d{1,2}:\d\d(?!\d)"
    r"|\b(?:ago|since|until|every (?:day|week|month|year|morning|evening|night|weekend)|"
    r"(?:last|this|next) (?:summer|spring|fall|autumn|winter))\b"
    r"|\d+\s*(?:月|日|号|点|年)|[一二三四五六七八九十]+(?:月|号|点钟)|(?:周|星期|礼拜)[一二三四五六日天]"
    r"|去年|今年|明年|前年",
    re.IGNORECASE,
)
_MONTH = re.compile(r"\b(?:" + _MONTHS + r")\b")  # case-sensitive: "may" the verb is lower case
_NUMBER_WORD = re.compile(
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|fifty|"
    r"hundred|thousand|million|dozen|couple|first|third|fourth|fifth)\b"
    # 一个, 一只 are mostly "a": a Chinese number word counts from two on.
    r"|(?:[两三四五六七八九十百千万]|一[十百千万])[一二两三四五六七八九十百千万]*"
    r"(?:个|只|条|本|次|年|天|岁|公里|块|元|斤|米|小时|分钟|人|家|件|张|套|台|辆|周|个月)",
    re.IGNORECASE,
)
# 我 as the subject, not the object of 给我 / 让我 / 跟我…; Japanese and Korean pronouns.
_CJK_FP = re.compile(
    r"(?<![给让对跟和把被帮叫找陪带请教诉使])(?:我|咱们|俺)|私|僕|わたし|저는|나는|제가|내가|저희|우리"
)
_CJK_OBJECT_FP = re.compile(r"我")
_CJK_HABIT = re.compile(r"总是|经常|常常|每天|每周|每个月|每年|一般|通常|平时|往往")
_CJK_ACTIVITY = re.compile(r"正在|最近在|一直在|在学|开始学|学做")
# 了 as an aspect marker, followed by what was done ("我去了公园", "我们买了车"), or 过; a
# sentence-final 了 is usually mood ("好多了", "太好了") unless the verb is a life event.
_CJK_EVENT = re.compile(
    r"(?:我|我们|咱们)[^，,。！？!?]{0,12}?(?:了(?=[\u4e00-\u9fff]{2})|过)"
    r"|(?:结婚|毕业|怀孕|退休|搬家|分手|离婚|生病|住院|出院|升职|辞职|入职|出生)了"
)
# Requests to the assistant and opinions are not facts about anyone.
_REQUEST = re.compile(
    r"\b(?:can|could|would|will) you\b|\bhelp me\b|\blet me know\b"
    r"|\bplease\b(?! (?:remember|note|keep in mind|don'?t forget))"
    r"|\bi (?:want|need) you to\b|\b(?:ask|tell|show) you\b|\bquestion for you\b"
    r"|请教|请问|问你|帮我|帮忙|告诉我|给我推荐|推荐一下|你觉得|你能|你可以",
    re.IGNORECASE,
)
_OPINION = re.compile(
    r"\bi (?:think|guess|feel like|believe|suppose)\b|我觉得|我认为|我感觉|我想我|我猜",
    re.IGNORECASE,
)
_CJK_OPENER = re.compile(
    r"^(?:好的|好吧|嗯|哈+|谢谢|感谢|不用谢|不客气|嗨|你好|您好|是的|没错|对[啊呀的]?|哇|当然)"
)
_CJK_PLAN = re.compile(r"打算|计划|准备|想要|要去|将要|会去|下次|预定|报名")
_CJK_NAME = re.compile(r"(?:叫|名叫|名字是|姓)(?:[\u4e00-\u9fff]{1,4}|[A-Za-z][\w-]+)")
# Chinese has no capitals: names of places, organisations and events end in a telling
# word (深圳市, 复旦大学, 招商银行, 金融论坛), titles stand in 《》 or 「」.
_CJK_ENTITY = re.compile(
    r"[\u4e00-\u9fff]{2,}(?:省|市|县|区|镇|村|路|街|大学|学院|中学|小学|学校|公司|集团|医院|银行|"
    r"论坛|大会|峰会|研讨会|博览会|展览|音乐节|文化节|公园|博物馆|图书馆|体育馆|车站|机场|酒店|餐厅)"
    r"|《[^》]{1,30}》|「[^」]{1,30}」"
)
# An attribute and its value: "论坛的地点是上海", "我女儿的生日是…".
_CJK_ATTRIBUTE = re.compile(r"的[\u4e00-\u9fff]{1,6}(?:是|为|在)")
_LATIN_NAME = re.compile(r"[A-Z][\w'’&.-]*")
_VOCATIVE_BEFORE = re.compile(r"(?:^|[,，]\s*)$")
_GREETING_BEFORE = re.compile(r"\b(?:hi|hey|hello|thanks|thank you|bye|dear|yo)[,\s]+$", re.I)
_NOT_NAMES = frozenset({"I", "I'm", "I've", "I'd", "I'll", "I’m", "I’ve", "I’d", "I’ll", "OK"})


def is_secret(text: str) -> bool:
    """Whether ``text`` looks like it holds a credential (never remembered)."""
    return _SECRET.search(text) is not None


def _codey(sentence: str) -> bool:
    if _CODE_LINE.match(sentence):
        return True
    symbols = sum(1 for c in sentence if c in _SYMBOLS)
    return symbols > max(3, len(sentence) // 8)


def _names(sentence: str, addressees: frozenset[str]) -> set[str]:
    """Capitalised words that are not the first word, "I", or someone addressed by name."""
    out: set[str] = set()
    for match in _LATIN_NAME.finditer(sentence):
        word = match.group(0).rstrip(".'’")
        before = sentence[: match.start()]
        if match.start() == 0 or word in _NOT_NAMES or not before.strip(" \"'“(«-"):
            continue
        if word.lower() in _NOT_CONTENT:
            continue  # "…, It means a lot": a capitalised common word is not a name
        after = sentence[match.end() :].lstrip()
        near = before[-16:]  # the words just before: anchored patterns, no rescans
        if _GREETING_BEFORE.search(near) or (
            word in addressees
            and _VOCATIVE_BEFORE.search(near)
            and (not after or after[0] in ",，!！.?？")
        ):
            continue  # "Thanks, Anna!" addresses Anna; it says nothing about her
        out.add(word)
    return out


def _content_words(sentence: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(sentence)]
    return [w for w in words if (len(w) >= 3 or w.isdigit()) and w not in _NOT_CONTENT]


def fact_score(sentence: str, *, addressees: frozenset[str] = frozenset()) -> float | None:
    """Worth of ``sentence`` as a memory (keep when ``>= KEEP``), or ``None``: never keep.

    Args:
        sentence: one sentence, whitespace-normalised.
        addressees: names of the people in the conversation; "Thanks, Anna!" addresses Anna
            rather than saying something about her, so such a name is not a signal.
    """
    kinds = cue_kinds(sentence)
    if "remember" in kinds and not _REMEMBER_REQUEST.search(sentence):
        kinds.remove("remember")  # "it helps us remember…" asks nothing
    strong = any(k in _STRONG_CUES for k in kinds)
    if is_secret(sentence) or _codey(sentence):
        return None
    if _QUESTION_END.search(sentence) and "remember" not in kinds:
        return None
    score = 3.0 if strong else max((_CUE_WEIGHT.get(k, 0.0) for k in kinds), default=0.0)
    if has_cjk(sentence) or not re.search(r"[A-Za-z]{2}", sentence):
        signals = _cjk_signals(sentence, strong, addressees)
    else:
        signals = _latin_signals(sentence, strong, addressees)
    return None if signals is None else score + signals


def _shared_signals(sentence: str, addressees: frozenset[str]) -> float:
    score = 0.0
    if re.search(r"\d", sentence):
        score += 1.5
    elif _NUMBER_WORD.search(sentence):
        score += 1.0
    if _TIME.search(sentence) or _MONTH.search(sentence) or has_date_phrase(sentence):
        score += 1.5
    if _RELATION.search(sentence):
        score += 1.5
    if _POSSESSION.search(sentence):
        score += 1.0
    if _NAMING.search(sentence):
        score += 1.5
    names = _names(sentence, addressees)
    if names:
        score += 1.5 + (0.5 if len(names) > 1 else 0.0)
    return score


def _latin_signals(sentence: str, strong: bool, addressees: frozenset[str]) -> float | None:
    content = _content_words(sentence)
    if len(content) < (1 if strong else 2) or len(sentence) < (6 if strong else 12):
        return None
    score = _shared_signals(sentence, addressees)
    subject = _FP_SUBJECT.search(sentence) is not None
    if subject:
        score += 1.5
    elif _FP_OTHER.search(sentence):
        score += 0.75
    if _EVENT.search(sentence):
        score += 1.5
    elif subject and _ACTIVITY.search(sentence):
        score += 1.0
    if _PLAN.search(sentence):
        score += 1.5 if subject else 0.5
    # The speaker's habits, and what happened to other people, last too.
    if subject and _HABIT.search(sentence):
        score += 1.5
    elif not subject and _OTHERS_EVENT.search(sentence):
        score += 1.0
    score += 1.0 if len(content) >= 8 else 0.5 if len(content) >= 5 else 0.0
    if (subject or _FP_OTHER.search(sentence)) and len(content) >= 6:
        score += 0.5
    if _OPENER.match(sentence) and not subject:
        score -= 1.5
    return score - _talk_penalty(sentence)


def _talk_penalty(sentence: str) -> float:
    """Requests ("can you…", 帮我…) and opinions ("I think…", 我觉得…) are talk, not facts; a
    standing rule asked for ("From now on, answer in German please.") is no passing request."""
    request = _REQUEST.search(sentence) and not standing_rule(sentence)
    return (2.0 if request else 0.0) + (1.0 if _OPINION.search(sentence) else 0.0)


def _cjk_signals(sentence: str, strong: bool, addressees: frozenset[str]) -> float | None:
    rest = _CJK_FILLER.sub("", sentence)
    if len(rest) < (3 if strong else 5):
        return None
    score = _shared_signals(sentence, addressees)
    first_person = _CJK_FP.search(sentence) is not None
    if first_person:
        score += 1.5
    elif _CJK_OBJECT_FP.search(sentence):
        score += 0.75
    elif "你" in sentence:
        score -= 1.0  # about the listener: advice and compliments
    if first_person and _CJK_HABIT.search(sentence):
        score += 1.5
    elif first_person and _CJK_ACTIVITY.search(sentence):
        score += 1.0
    if _CJK_EVENT.search(sentence):
        score += 1.5
    if _CJK_PLAN.search(sentence):
        score += 1.5 if first_person else 0.5
    if _CJK_NAME.search(sentence) or _CJK_ENTITY.search(sentence):
        score += 1.5
    if _CJK_ATTRIBUTE.search(sentence):
        score += 1.0
    score += 1.0 if len(rest) >= 14 else 0.5 if len(rest) >= 7 else 0.0
    if _CJK_OPENER.match(sentence):
        # "你好，我是…" introduces the speaker: an opener before a first-person statement
        # weighs less than one before a reaction.
        score -= 0.5 if first_person else 1.5
    return score - _talk_penalty(sentence)
