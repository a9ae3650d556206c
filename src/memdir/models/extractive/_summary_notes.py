"""What the extractive summary says in words: classified sentences and tool outcomes.

User sentences become decisions, constraints, preferences and facts; assistant sentences
become decisions, findings and commitments; tool output contributes its error lines and its
outcome line (``3 failed, 10 passed``, ``exit code 2``). Labels come in the conversation's
language, English or Chinese, and :func:`parse_bullet` reads them back when an earlier summary is
folded in. Cue lists are general (decided / agreed / we'll use / 决定 / 采用 …), never tied to
particular strings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memdir.messages import Msg, ToolUseBlock
from memdir.models.extractive._extract import clip, cue_kinds, has_cjk, sentences, tokens
from memdir.models.extractive._summary_artifacts import call_command

__all__ = [
    "DURABLE",
    "LABELS",
    "assistant_kind",
    "call_label",
    "commitment",
    "conflicts",
    "direction_change",
    "language",
    "output_lines",
    "parse_bullet",
    "render_bullet",
    "request_gist",
    "strip_label",
    "tier",
    "user_kinds",
]

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "decision": "Decision",
        "constraint": "Constraint",
        "preference": "Preference",
        "note": "Note",
        "deadline": "Deadline",
        "fact": "Fact",
        "finding": "Finding",
        "result": "Result",
        "error": "Error",
        "answer": "Answered",
    },
    "zh": {
        "decision": "决定",
        "constraint": "约束",
        "preference": "偏好",
        "note": "备注",
        "deadline": "截止",
        "fact": "事实",
        "finding": "发现",
        "result": "结果",
        "error": "错误",
        "answer": "答复",
    },
}
DURABLE = frozenset({"decision", "constraint", "preference", "note", "deadline", "fact"})
_TIERS = {"answer": 0, "error": 0, "result": 1, "finding": 1}
_ZH_MARKS = re.compile(
    "^(?:- (?:"
    + "|".join(LABELS["zh"].values())
    + "|未完成的|最后的用户请求|助手计划|使用的工具|（另有)"
    r"|(?:文件|命令|标识符|链接|其他)：$)",
    re.M,
)
_EN_MARKS = re.compile(
    "^(?:- (?:" + "|".join(LABELS["en"].values()) + r"|Open user request|Last user request|"
    r"Assistant's plan|Pending tool call|Tools used|\(\+\d)|(?:Files|Commands|Identifiers|URLs|"
    r"Other):$)",
    re.M,
)
_LABEL_KIND = {label.lower(): kind for table in LABELS.values() for kind, label in table.items()}
_LABEL = re.compile(
    r"^\s*([A-Za-z]+|[\u4e00-\u9fff]{2})\s*(?:\(([^()]{1,160})\)|（([^（）]{1,160})）)?\s*[:：]\s*"
)


class _Cue:
    """A pattern behind a cheap check: a line without any of its hint words cannot match.

    Alternations of ``\\b``-anchored words are slow in :mod:`re` (every position is tried), and
    most lines of a long session match none of them.
    """

    __slots__ = ("hints", "pattern")

    def __init__(self, hints: str, pattern: str, flags: int = 0) -> None:
        self.hints = tuple(hints.split("|"))
        self.pattern = re.compile(pattern, flags)

    def search(self, text: str) -> bool:
        low = text.lower()
        return any(h in low for h in self.hints) and self.pattern.search(text) is not None


_DECISION = _Cue(
    "decid|decision|agree|chose|settled|opted|use|go with|switch|stick with|keep|"
    "adopt|move to|going with|决|采用|选|改用|定下|就用|统一用|商定|确定",
    r"\b(?:we|i|they|the team)\s+(?:have\s+|had\s+)?(?:decided|agreed|chose|settled on|opted)\b"
    r"|\b(?:we|i)(?:'ll|’ll| will| are going to|'re going to)\s+(?:use|go with|switch to|"
    r"stick with|keep|adopt|move to)\b"
    r"|\blet'?s\s+(?:use|go with|switch to|stick with|keep|adopt)\b|\bgoing with\b"
    r"|^(?:decision|decided|agreed)\s*[:：]|\b(?:decided|agreed) (?:to|on|that)\b"
    r"|决定|决策|采用|选定|选用|改用|定下|就用|统一用|商定|确定(?:用|使用|采用|为)",
    re.I,
)
_RULE_VERBS = (
    "use|do|run|call|send|write|deploy|push|commit|put|add|ask|touch|change|edit|modify|delete|"
    "remove|include|keep|return|answer|reply|respond|mention|log|store|check|test|merge|create|"
    "install|upgrade|rename|expose|share|print"
)
# Rules, not moods: "never touch X", "always ask first", "must not exceed", "Don't …" at the
# start; "I'm always here for you" and "must have been hard" are not constraints.
_CONSTRAINT = _Cue(
    "must|never|always|avoid|no more than|at most|at least|make sure|ensure|"
    "required|not allowed|forbidden|only |do not|don|"
    "必须|务必|不要|不能|不得|禁止|不允许|只能|只用|至少|最多|不超过|确保|一定要",
    r"\b(?:always|never)\s+(?:" + _RULE_VERBS + r")\b"
    r"|^(?:please\s+)?(?:never|always|avoid|make sure|ensure)\b"
    r"|\bmust(?:n't| not)?\s+(?!have\b)\w"
    r"|\b(?:no more than|at most|at least|ensure that|is required|are required|not allowed|"
    r"forbidden|only (?:use|touch|change|edit|modify|run))\b"
    r"|\b(?:do not|don'?t)\s+(?!know|understand|see|think|get|care|remember|worry|forget|"
    r"mind|like|want|have|feel)\w"
    r"|必须|务必|不要|不能|不得|禁止|不允许|只能|只用|至少|最多|不超过|确保|一定要",
    re.I,
)
_FINDING = _Cue(
    "found|root cause|the issue|the problem|the bug|the cause|the error|turns out|"
    "fixed|resolved|works now|now works|now passes|passes now|pass|confirmed|"
    "verified|caused by|原因|发现|修复|已解决|测试通过|已完成",
    r"\b(?:found|root cause|the (?:issue|problem|bug|cause|error) (?:is|was)|turns out|"
    r"fixed|resolved|works now|now (?:works|passes)|passes now|all (?:\d+ )?tests? pass(?:ed)?|"
    r"confirmed|verified|caused by)\b|原因是|原因在于|发现|已修复|修复了|已解决|测试通过|已完成",
    re.I,
)
_COMMIT = _Cue(
    "i'll|i’ll|i will|going to|next|plan to|need to|remaining|todo|to do|"
    "我会|我将|我来|接下来|下一步|待办|还需要",
    r"\b(?:i'll|i’ll|i will|i'm going to|i am going to|next,? i|i plan to|i still need to|"
    r"still need to|remaining:|todo:?|to do:|next step)\b|我会|我将|我来|接下来|下一步|待办|还需要",
    re.I,
)
# Something asked for: a polite form, a question, or an imperative verb first.
_REQUEST = re.compile(
    r"\b(?:please|can you|could you|would you|will you|i want|i need|i'd like|i would like|"
    r"let'?s|help me)\b|[?？]"
    r"|^(?:fix|add|write|create|update|make|implement|remove|delete|rename|refactor|run|check|"
    r"find|show|explain|open|build|deploy|migrate|move|draft|review|test|debug|investigate|"
    r"change|set|install|summari[sz]e|translate|generate|list|look|try|compare|send|prepare|"
    r"plan|design|analy[sz]e|clean|convert|port|upgrade|revert|merge|commit|push|tell|give)\b"
    r"|帮我|帮忙|请|我想|我要|我需要|能不能|能否|可以帮|麻烦|怎么|如何|吗[？?]?$",
    re.I,
)
_DIRECTION = _Cue(
    "now|next|then|also|instead|actually|ok|new task|change of plan|forget|never|"
    "one more|another|switch|going forward|rather than|"
    "现在|接下来|然后|另外|还有|改为|换成|不用了|算了|新任务|下一步|改成|换个|改用",
    r"^(?:now|next|then|also|instead|actually|ok(?:ay)?,? now|new task|change of plan|"
    r"forget (?:that|it)|never ?mind|one more thing|another thing|switch)\b"
    r"|\b(?:instead|new task|change of plan|switch to|from now on|going forward|rather than)\b"
    r"|^(?:现在|接下来|然后|另外|还有|改为|换成|不用了|算了|新任务|下一步)|改成|换个|改用",
    re.I,
)
_FILLER = re.compile(
    r"^(?:ok(?:ay)?|yes|yeah|yep|no|sure|thanks?(?: you)?|great|good|fine|cool|got it|"
    r"好的?|好吧|嗯+|行|可以|谢谢|收到|明白了?)[\s.!。！,，]*$",
    re.I,
)
_ERROR_LINE = _Cue(
    "e  |error|fatal|panic|traceback|fail|err!|exception|fault|错误|失败|异常|报错",
    r"^\s*(?:E\s{2,}|error\b|fatal\b|panic:|traceback\b|failed\b|fail:|npm err!|"
    r"[\w.]*(?:Error|Exception|Failure|Fault)\b(?::|$))"
    r"|\b(?:error|exception)(?:\[\w+\])?:|\berror (?:TS|CS)\d+|\bFAILED\b|\bsegmentation fault\b"
    r"|错误|失败|异常|报错",
    re.I,
)
_EXCEPTION = re.compile(r"^\s*[\w.]*(?:Error|Exception|Failure|Interrupt|Exit)\b:?\s")
_OUTCOME = _Cue(
    "passed|failed|error|skipped|xfail|xpass|deselected|ok (|failed (|ran |test|"
    "build|exit|found|checks passed|no issues|changed|reformatted|测试",
    r"\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b|^(?:OK|FAILED) \("
    r"|\bRan \d+ tests?\b|\bTests?:\s+\d+|\bBUILD (?:SUCCESS(?:FUL)?|FAILED)\b"
    r"|\bexit(?:ed)? (?:code|status|with code|with status) -?\d+|\bFound \d+ errors?\b"
    r"|\ball checks passed\b|\bno issues found\b|\b\d+ (?:files? )?(?:changed|reformatted)\b"
    r"|个?测试(?:通过|失败)",
    re.I,
)
_ERROR_WORDS = (
    "error",
    "fail",
    "exception",
    "traceback",
    "fatal",
    "panic",
    "err!",
    "fault",
    "e  ",
    "错误",
    "失败",
    "异常",
    "报错",
)
_DISCOURSE = frozenset(
    {
        *("actually", "ok", "okay", "so", "then", "now", "well", "instead", "update"),
        *("correction", "sorry", "wait", "also", "其", "实"),
    }
)
_RULER = re.compile(r"^[\s=\-_*#~.]+|[\s=\-_*#~.]+$")


def language(msgs: Sequence[Msg], previous: str = "") -> str:
    """``"zh"`` when the user writes mostly Chinese, else ``"en"``.

    Without user text, an earlier summary decides: the language of its labels, else of its
    words.
    """
    texts = [m.text for m in msgs if m.role == "user" and m.text.strip()]
    if not texts and previous:
        zh, en = len(_ZH_MARKS.findall(previous)), len(_EN_MARKS.findall(previous))
        if zh or en:
            return "zh" if zh > en else "en"
        texts = [previous]
    cjk = latin = 0
    for text in texts[-50:]:
        prose = " ".join(sentences(text))
        cjk += sum(1 for ch in prose if "\u3400" <= ch <= "\u9fff")
        latin += len(re.findall(r"[A-Za-z]{2,}", prose))
    return "zh" if cjk and cjk >= latin else "en"


def tier(kind: str) -> int:
    """How long a line of ``kind`` is kept: answers and errors go first, decisions last."""
    return 2 if kind in DURABLE else _TIERS.get(kind, 1)


def parse_bullet(bullet: str) -> tuple[str, str, str]:
    """``(kind, context, text)`` of a summary bullet; kind ``"other"`` when it has no label."""
    body = bullet.strip().lstrip("-*• ").strip()
    match = _LABEL.match(body)
    if match and match.group(1).lower() in _LABEL_KIND and match.end() < len(body):
        context = match.group(2) or match.group(3) or ""
        return _LABEL_KIND[match.group(1).lower()], context, body[match.end() :]
    return "other", "", body


def render_bullet(kind: str, context: str, text: str, lang: str) -> str:
    """One labelled bullet: ``- Error (bash `make`): …`` / ``- 错误（bash `make`）：…``."""
    if kind not in LABELS[lang]:
        return f"- {text}"
    zh = lang == "zh"
    where = (f"（{context}）" if zh else f" ({context})") if context else ""
    return f"- {LABELS[lang][kind]}{where}{'：' if zh else ': '}{text}"


def strip_label(sentence: str, kind: str | None = None) -> str:
    """``sentence`` without its leading labels of ours (of ``kind``, if given)."""
    while True:
        found, context, text = parse_bullet(sentence)
        if found == "other" or context or (kind is not None and found != kind):
            return sentence
        sentence = text


def user_kinds(sentence: str) -> str | None:
    """What a user sentence records: decision, constraint, preference, note, deadline, fact."""
    if sentence.endswith(("?", "？")):
        return None
    if _DECISION.search(sentence):
        return "decision"
    cues = cue_kinds(sentence)
    if "preference" in cues:
        return "preference"
    if "rule" in cues or _CONSTRAINT.search(sentence):
        return "constraint"
    for cue, kind in (("remember", "note"), ("deadline", "deadline"), ("person", "fact")):
        if cue in cues:
            return kind
    return "fact" if "fact" in cues else None


def assistant_kind(sentence: str) -> str | None:
    """What an assistant sentence records: a decision or a finding (or nothing)."""
    if sentence.endswith(("?", "？")):
        return None
    if _DECISION.search(sentence):
        return "decision"
    return "finding" if _FINDING.search(sentence) else None


def commitment(sentence: str) -> bool:
    """Whether an assistant sentence promises further work ("I'll draft…", "下一步…")."""
    return bool(_COMMIT.search(sentence)) and not sentence.endswith(("?", "？"))


def request_gist(text: str, limit: int = 240) -> str:
    """A user message as a request: its first sentences that are not acknowledgements."""
    parts = [s for s in sentences(text) if not _FILLER.match(s)][:3]
    if not parts:
        return ""
    joined = ("" if any(has_cjk(p) for p in parts) else " ").join(parts)
    words = [t for t in tokens(joined) if not t.isdigit()]  # "2026-11-30" asks for nothing
    substantive = len(words) >= (4 if has_cjk(joined) else 3)
    return clip(joined, limit) if substantive else ""


def direction_change(gist: str, earlier: Sequence[str]) -> bool:
    """Whether a request changes direction: a cue ("now", "instead", 改为…) or a new topic."""
    if _DIRECTION.search(gist):
        return True
    if not _REQUEST.search(gist):
        return False  # a remark, not something asked for
    words = set(tokens(gist))
    seen = {t for g in earlier for t in tokens(g)}
    return not words or len(words & seen) / len(words) < 0.25


def conflicts(new: str, old: str) -> bool:
    """Whether ``new`` replaces ``old``: same opening, mostly the same words, one choice
    changed ("we'll use tabs" → "we'll use spaces")."""
    a, b = _core(new), _core(old)
    opening = 3 if has_cjk(new) else 2
    if len(a) <= opening or len(b) <= opening or a[:opening] != b[:opening]:
        return False
    # One span replaced, the rest shared: "use tabs" → "use spaces". "Option 1 for c1" vs
    # "option 2 for c2" differ in two places: two facts about two things.
    limit = min(len(a), len(b))
    head = next((i for i in range(limit) if a[i] != b[i]), limit)
    tail = next((i for i in range(limit - head) if a[-1 - i] != b[-1 - i]), limit - head)
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    if {t for t in mid_a if not has_cjk(t)} & set(mid_b):  # Chinese characters repeat
        return False
    shared = head + tail
    return all(shared >= len(t) / 2 and len(t) - shared <= 4 for t in (a, b))


def _core(sentence: str) -> list[str]:
    """The tokens of a sentence without its label and leading discourse words ("actually")."""
    words = tokens(strip_label(sentence))
    start = 0
    while start < len(words) and words[start] in _DISCOURSE:
        start += 1
    return words[start:]


def call_label(call: ToolUseBlock | None, name: str | None) -> str:
    """How a tool call is named in a summary line: its command, or its name and target."""
    if call is None:
        return name or "tool"
    command = call_command(call)
    if command:
        return f"{call.name} `{clip(command, 80)}`"
    for key in ("path", "file_path", "file", "url", "query", "name"):
        value = call.input.get(key)
        if isinstance(value, str) and value.strip():
            return f"{call.name} {clip(value, 80)}"
    return call.name


def output_lines(text: str, is_error: bool) -> list[tuple[str, str]]:
    """The error lines and the outcome line of a tool's output, as ``(kind, line)``.

    Only the head and tail of a long output are read: that is where errors, tracebacks and
    test summaries are. A traceback contributes its final exception line.
    """
    if len(text) > 16_000:
        text = text[:8_000] + "\n" + text[-8_000:]
    low = text.lower()
    out: list[tuple[str, str]] = []
    picked: list[str] = []
    if is_error or any(word in low for word in _ERROR_WORDS):
        lines = [ln for ln in (_RULER.sub("", raw).strip() for raw in text.splitlines()) if ln]
        errors = [ln for ln in lines if _ERROR_LINE.search(ln) and not _OUTCOME.search(ln)]
        exceptions = [ln for ln in errors if _EXCEPTION.match(ln)]
        picked = [*errors[:2], *exceptions[-1:]]
        if is_error and not picked and lines:
            picked = lines[:1]
    for line in dict.fromkeys(picked):
        out.append(("error", clip(line, 200)))
    # A run's outcome is one of its last lines.
    tail = [ln.strip() for ln in text.rstrip().splitlines()[-40:]]
    outcome = None
    if _OUTCOME.search("\n".join(tail)):
        outcome = next((ln for ln in reversed(tail) if ln and _OUTCOME.search(ln)), None)
    if outcome:
        out.append(("result", clip(_RULER.sub("", outcome), 200)))
    return out
