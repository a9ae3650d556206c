"""Secrets never reach memory files: provider formats, context, over-masking, stability, paths."""

from __future__ import annotations

import base64
import dataclasses
import random
import re
import string

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.errors import ConfigError
from memdir.eviction import ToolResultEvictionConfig, ToolResultEvictor
from memdir.memory import MemoryConsolidator, MemoryFlushManager
from memdir.messages import Msg, ToolUseBlock
from memdir.redact import DEFAULT_PATTERNS, RedactionPattern, Redactor, redact
from memdir.store.ledger import append_bullets
from memdir.testing import FunctionModel, ModelCall, ScriptedModel
from memdir.tools import memory_add
from memdir.workspace import Workspace

# Fake credentials assembled at run time, in the shapes the providers document.
_RNG = random.Random(7)
AN = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def fake(chars: str, n: int) -> str:
    while True:
        value = "".join(_RNG.choice(chars) for _ in range(n))
        if n < 8 or (re.search("[a-z]", value) and re.search("[0-9]", value)):
            return value


OPENAI = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
ANTHROPIC = "sk-ant-api03-" + fake(AN + "_-", 93) + "AA"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
SLACK = "xoxb-" + "1234567890-abcdefghij"
GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
HF = "hf_" + fake(AN, 34)
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
PASSWORD = "Tr0ub4dor&3x"

# The provider formats the old list did not know.
PROVIDERS = {
    "sendgrid_key": "SG." + fake(AN + "_-", 22) + "." + fake(AN + "_-", 43),
    "mailgun_key": "key-" + fake(HEX, 32),
    "twilio_key": "SK" + fake(HEX, 32),
    "twilio_account_sid": "AC" + fake(HEX, 32),
    "digitalocean_token": "dop_v1_" + fake(HEX, 64),
    "shopify_token": "shpat_" + fake(HEX, 32),
    "databricks_token": "dapi" + fake(HEX, 32),
    "vault_token": "hvs." + fake(AN + "_-", 90),
    "square_token": "sq0atp-" + fake(AN + "_-", 22),
    "pypi_token": "pypi-AgEIcHlwaS5vcmc" + fake(AN + "_-", 120),
    "discord_token": "MT" + fake(AN, 22) + "." + fake(AN, 6) + "." + fake(AN + "_-", 27),
    "telegram_token": "123456789:AA" + fake(AN + "_-", 33),
    "stripe_webhook_secret": "whsec_" + fake(AN, 32),
    "google_oauth": "GOCSPX-" + fake(AN + "_-", 28),
    "alibaba_key": "LTAI" + fake(AN, 20),
    "tencent_key": "AKID" + fake(AN, 32),
    "memdir_api_key": "mdk_"
    + fake("abcdefghijklmnopqrstuvwxyz234567", 16)
    + "_"
    + fake(AN + "_-", 43),
}
SLACK_WEBHOOK_TAIL = "T0ABCDEFG/B0ABCDEFGHI/" + fake(AN, 24)


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (f"my key is {OPENAI} ok", OPENAI, "openai_key"),
        (f"ANTHROPIC: {ANTHROPIC}", ANTHROPIC, "anthropic_key"),
        (f"token {GITHUB}", GITHUB, "github_token"),
        (f"id {AWS_ID} here", AWS_ID, "aws_access_key"),
        (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_key"),
        (f"cookie {JWT}", JWT, "jwt"),
        (f"slack {SLACK}", SLACK, "slack_token"),
        (f"maps {GOOGLE}", GOOGLE, "google_api_key"),
        (f"hub {HF}", HF, "huggingface_token"),
        (f"pay {STRIPE}", STRIPE, "stripe_key"),
        ("Authorization: Bearer abcDEF123456ghiJKL789", "abcDEF123456ghiJKL789", "bearer_token"),
        ("db at postgres://app:s3cr3t-pw@db.local:5432/x", "s3cr3t-pw", "url_password"),
        ("set password=hunter2 in the env", "hunter2", "assignment"),
        ('{"api_key": "live-123456"}', "live-123456", "assignment"),
        ("export GITHUB_TOKEN=abcdef123", "abcdef123", "assignment"),
        *[(f"export X={value}", value, kind) for kind, value in PROVIDERS.items()],
        (
            f"post to https://hooks.slack.com/services/{SLACK_WEBHOOK_TAIL}",
            SLACK_WEBHOOK_TAIL,
            "slack_webhook",
        ),
    ],
)
def test_each_kind_of_secret_is_masked(text: str, secret: str, kind: str) -> None:
    out = redact(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert Redactor().findings(text).get(kind, 0) >= 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # credentials without "=" or ":" before them
        ("mysql -u root -pS3cretPass99 orders", "mysql -u root -p[REDACTED:cli_password] orders"),
        (
            "psql --username app --password swordfish",
            "psql --username app --password [REDACTED:cli_flag]",
        ),
        ("tool --api-key=Zx81kQ0pLm2Nv7Bt", "tool --api-key=[REDACTED:cli_flag]"),
        (
            "sshpass -p 'hunter22' ssh root@10.0.0.5",
            "sshpass -p '[REDACTED:cli_password]' ssh root@10.0.0.5",
        ),
        (
            "curl -u admin:pa55word https://ci.example.com",
            "curl -u admin:[REDACTED:cli_password] https://ci.example.com",
        ),
        (f"the root password is {PASSWORD}", "the root password is [REDACTED:stated_secret]"),
        (
            f"The password for the staging box is {PASSWORD}.",
            "The password for the staging box is [REDACTED:stated_secret].",
        ),
        (
            "machine api.example.com login bob password c4cd94da15ea",
            "machine api.example.com login bob password [REDACTED:netrc_password]",
        ),
        (
            "machine ftp.example.com\n  login alice\n  password swordfish\n",
            "machine ftp.example.com\n  login alice\n  password [REDACTED:netrc_password]\n",
        ),
        (
            "Cookie: sessionid=q8XpL2mNv0bT5kRw; theme=dark",
            "Cookie: sessionid=[REDACTED:cookie]; theme=dark",
        ),
        # a bare AWS secret key next to its key id
        (f"{AWS_ID} {AWS_SECRET}", "[REDACTED:aws_access_key] [REDACTED:aws_secret_key]"),
        (
            f"Access key ID,Secret access key\n{AWS_ID},{AWS_SECRET}",
            "Access key ID,Secret access key\n[REDACTED:aws_access_key],[REDACTED:aws_secret_key]",
        ),
        # Azure connection strings and SAS URLs
        (
            f"AccountName=acct;AccountKey={'Ab3+' * 22}==;EndpointSuffix=core.windows.net",
            "AccountName=acct;AccountKey=[REDACTED:azure_storage_key];EndpointSuffix=core.windows.net",
        ),
        (
            "https://a.blob.core.windows.net/c/f.pdf?sv=2022-11-02&sp=r&sig=Q9x%2Bk2LmN0pQrStUvWxYz%3D",
            "https://a.blob.core.windows.net/c/f.pdf?sv=2022-11-02&sp=r&sig=[REDACTED:url_signature]",
        ),
        # a URL with a password and no user
        (
            "REDIS_URL=redis://:s3cretpw@cache:6379/0",
            "REDIS_URL=redis://:[REDACTED:url_password]@cache:6379/0",
        ),
        # a token in a query string, the next parameter kept; a session token of any length
        (
            "https://x.example.com/cb?access_token=Zx81kQ0pLm2Nv7Bt9&expires=3600",
            "https://x.example.com/cb?access_token=[REDACTED:assignment]&expires=3600",
        ),
        (
            "aws_session_token = IQoJb3JpZ2luX2Vj" + "Ab3dEf6h" * 150,
            "aws_session_token = [REDACTED:assignment]",
        ),
    ],
)
def test_credentials_known_by_their_context_are_masked(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("密码：Xk9mQ2vLp7", "密码：[REDACTED:cjk_secret]"),
        ("密码：sunshine", "密码：[REDACTED:cjk_secret]"),
        ("数据库密码是 Xk9mQ2vLp7，别外传", "数据库密码是 [REDACTED:cjk_secret]，别外传"),
        ("口令：Ab12cd34ef", "口令：[REDACTED:cjk_secret]"),
        ("访问令牌是 q8XpL2mNv0bT5kRwZ3", "访问令牌是 [REDACTED:cjk_secret]"),
        ("令牌：q8XpL2mNv0bT5kRwZ3", "令牌：[REDACTED:cjk_secret]"),
        ("token：q8XpL2mNv0bT5kRwZ3", "token：[REDACTED:assignment]"),
        ("パスワード：abc12345", "パスワード：[REDACTED:cjk_secret]"),
        ("パスワードは abc12345 です", "パスワードは [REDACTED:cjk_secret] です"),
        ("비밀번호: abc12345", "비밀번호: [REDACTED:cjk_secret]"),
        ("비밀번호는 abc12345 입니다", "비밀번호는 [REDACTED:cjk_secret] 입니다"),
    ],
)
def test_every_cjk_keyword_form_is_masked(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Reset password: click the link",
        "token = tokenizer.encode(text)",
        "PWD=/home/dana",
        "OLDPWD=/home/dana/src",
        "pip install sk-video-processing-toolkit-2",
        "xoxo-gossip-girl",
        "the password is stored in the team vault",
        "password: ********",
        "api_key: ${API_KEY}",
        'password = os.environ["DB_PASSWORD"]',
        "      token: ${{ secrets.GITHUB_TOKEN }}",
        "access_token = response.json()['access_token']",
        "api_key: Optional[str] = None",
        "The secret is out: we ship on Monday.",
        "Secret Santa: everyone brings a gift",
        "token: 4000 used of 8192",
        "mysql -u root -p",
        "echo $PASS | docker login --username bob --password-stdin",
        "password: changeme  # replace before deploying",
        "secretKeyRef:\n  name: db-credentials\n  key: password",
        "object key: uploads/0db3ec3e19fed6d99b0bb22b/index.png",
        "密码错误，请重试。",
        "令牌已过期，请重新登录。",
        "token：已过期",
        "パスワードを忘れた場合は管理者に連絡してください。",
        "비밀번호를 입력하세요.",
        "Cookie: theme=dark; lang=en",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "request_id=0f8e7d6c-5b4a-4392-a1b0-c9d8e7f6a5b4 status=200",
        # what the old list got right stays right
        "Alice prefers green tea and works on Project X.",
        "set max_tokens=4000 and temperature=0.2",
        "The meeting is at 10:30 with Bob (bob@example.com).",
        "see https://example.com/path?q=1",
        "用户喜欢喝绿茶，项目截止日期是 2026-12-01。",
        "the author: Jane Doe",
    ],
)
def test_text_without_a_secret_keeps_every_word(text: str) -> None:
    assert redact(text) == text


def test_context_around_the_secret_is_kept() -> None:
    assert redact("password=hunter2") == "password=[REDACTED:assignment]"
    url = redact("clone https://bob:pa55word@git.example.com/repo.git")
    assert url == "clone https://bob:[REDACTED:url_password]@git.example.com/repo.git"
    assert redact("Authorization: Bearer abcdefghijklmnop1234") == (
        "Authorization: Bearer [REDACTED:bearer_token]"
    )
    # A value is masked, not the sentence after it.
    assert redact("my password: Hunter2x and then we left") == (
        "my password: [REDACTED:assignment] and then we left"
    )


def test_a_quoted_passphrase_is_masked_whole() -> None:
    out = redact('{"passphrase": "correct horse battery staple"}')
    assert out == '{"passphrase": "[REDACTED:assignment]"}'


def test_private_key_blocks_are_masked_whole_even_unterminated() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----"
    out = redact(f"key:\n{block}\nafter")
    assert "MIIEowIBAAKCAQEA" not in out
    assert out.endswith("[REDACTED:private_key]\nafter")
    cut = redact("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt\nmore")
    assert "b3BlbnNzaC1rZXkt" not in cut
    escaped = (
        '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIB\\n-----END PRIVATE KEY-----\\n"'
    )
    assert "MIIEvQIB" not in redact(escaped)


# -- properties ----------------------------------------------------------------------------

_SECRET_PIECES = [
    OPENAI,
    ANTHROPIC,
    GITHUB,
    AWS_ID,
    AWS_SECRET,
    JWT,
    SLACK,
    GOOGLE,
    HF,
    STRIPE,
    *PROVIDERS.values(),
    f"password={PASSWORD}",
    f"密码：{PASSWORD}",
    f"-p{PASSWORD}",
    "machine h login u password ",
    "Cookie: sid=",
    "redis://:",
    "@host",
    "the token is ",
    "--password ",
    '"api_key": "',
    "[REDACTED:openai_key]",
    "[REDACTED:",
]
_FILLER = [
    "password",
    "token",
    "secret",
    "key",
    "=",
    ": ",
    "：",
    '"',
    "'",
    " ",
    "\n",
    "is",
    "密码",
    "令牌",
    "hunter2",
    "abc123XYZ789",
    "click",
    "/home/dana",
    "-",
    ".",
]


@given(st.lists(st.sampled_from(_SECRET_PIECES + _FILLER) | st.text(max_size=12), max_size=14))
def test_redaction_is_stable(pieces: list[str]) -> None:
    once = redact("".join(pieces))
    assert redact(once) == once


@given(st.text(max_size=300))
def test_redaction_of_any_text_is_stable(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def _hex(n: int) -> st.SearchStrategy[str]:
    return st.text(HEX, min_size=n, max_size=n)


# Data that looks random but is not a credential, with ordinary words.
_DATA = st.one_of(
    _hex(40),
    _hex(64),
    _hex(32),
    st.uuids().map(str),
    st.binary(min_size=6, max_size=60).map(lambda b: base64.b64encode(b).decode()),
    st.builds(
        "https://example.com/{}/{}?page={}".format,
        _hex(8),
        st.sampled_from(["a", "b"]),
        st.integers(1, 99),
    ),
    st.builds("sha256:{}".format, _hex(64)),
    st.sampled_from(["commit", "uuid", "etag", "the", "reset", "expires", "build", "用户", "是"]),
    st.integers(0, 10**9).map(str),
)
# A secret's keyword and separator, then a value that is not a secret: a path, code, a template,
# a placeholder, a number; or a word in a sentence that goes on ("password: click the link" —
# alone on its line, ``password: click`` is how YAML writes a password, and is masked).
_KEYWORDS = st.sampled_from(
    ["password", "Password", "token", "secret", "api_key", "DB_PASSWORD", "the token", "密码",
     "令牌", "パスワード", "비밀번호", "auth"]
)  # fmt: skip
_SEPARATORS = st.sampled_from([": ", " = ", " is ", "：", "是", " : ", " was changed to "])
_NOT_LITERALS = st.sampled_from(
    ["required", "None", "tokenizer.encode(text)", "/home/dana", "$TOKEN", "${API_KEY}",
     "********", "os.environ['X']", "self.token", "4000", "2026-12-01", "invalid", "changeme",
     "string", "<your password>", "3.14", "expired"]
)  # fmt: skip
_TAILS = st.sampled_from(["", " the link", ", then retry", "。", " in the vault"])
_WORDS = st.sampled_from(["click", "Click", "stored", "rotated", "sent", "hidden"])
_PROSE_TAILS = st.sampled_from([" the link", " in the vault", " by the ops team", "，请联系管理员"])


@given(st.lists(_DATA, min_size=1, max_size=12), st.sampled_from([" ", "\n", ", "]))
@example(["AAAAAAAAAAAA+pw=", "0000000000000000000000000000000a"], " ")  # "pw" inside base64
def test_plain_data_never_changes(words: list[str], sep: str) -> None:
    text = sep.join(words)
    assert redact(text) == text


@given(
    _KEYWORDS,
    _SEPARATORS,
    st.tuples(_NOT_LITERALS, _TAILS) | st.tuples(_WORDS, _PROSE_TAILS),
)
def test_a_keyword_before_a_value_that_is_not_a_secret_changes_nothing(
    keyword: str, sep: str, value_and_tail: tuple[str, str]
) -> None:
    text = f"{keyword}{sep}{''.join(value_and_tail)}"
    assert redact(text) == text


@given(st.sampled_from([OPENAI, GITHUB, JWT, AWS_ID, *PROVIDERS.values()]), st.text(max_size=50))
def test_secret_in_any_surrounding_is_masked(secret: str, noise: str) -> None:
    out = redact(f"{noise} {secret} {noise}")
    assert secret not in out or secret in noise


# Each built-in pattern once more without its pre-checks, so no shortcut applies.
_UNGATED = Redactor(
    [
        dataclasses.replace(p, keywords=(), gate="", keyword_first=False, in_token=False)
        for p in DEFAULT_PATTERNS
    ]
)
# The secret halves of credential pairs, found only next to their key ids.
_PAIR_HALVES = [fake(HEX, 32), fake(AN, 30), fake(AN, 32), AWS_SECRET, " md5 ", "  a.tar.gz"]
_PIECES = [
    *_SECRET_PIECES,
    *_PAIR_HALVES,
    "password",
    "PassWord",
    "paſſword",
    "prİvate_key",
    "API-KEY",
    "Token",
    "auth",
    "secret",
    "aws_secret_access_key",
    "Bearer ",
    "Authorization: basic ",
    "https://bob:",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "=",
    ": ",
    '"',
    "'",
    " ",
    "\n",
    "hunter2",
    "abc123XYZ789",
    "用户",
    "\u212a",
    "İ",
    "\u0307",
    "mysql -u a",
    " -p",
    "sshpass -p ",
    "curl -u a:",
    "ﬀ",
]


@given(st.lists(st.sampled_from(_PIECES), max_size=12))
def test_skipping_patterns_that_cannot_match_changes_nothing(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert redact(text) == _UNGATED.redact(text)
    assert Redactor().findings(text) == _UNGATED.findings(text)


def test_case_folding_letters_do_not_hide_a_keyword() -> None:
    # Under re.IGNORECASE "ſ" matches "s" and the Kelvin sign matches "k".
    assert "hunter22" not in redact("paſſword=hunter22")
    assert "abcdef123" not in redact("to\u212aen: abcdef123")


# -- the public surface ----------------------------------------------------------------------


def test_custom_patterns_extend_the_list() -> None:
    acme = RedactionPattern(name="acme", regex=r"acme_[0-9a-f]{16}", keywords=("acme_",))
    redactor = Redactor(extra=[acme])
    assert redactor("k=acme_0123456789abcdef") == "k=[REDACTED:acme]"
    assert redactor.findings("acme_0123456789abcdef and acme_fedcba9876543210") == {"acme": 2}
    assert len(redactor.patterns) == len(DEFAULT_PATTERNS) + 1


def test_a_check_decides_per_match() -> None:
    pin = RedactionPattern(
        name="pin", regex=r"pin (?P<v>\d+)", group="v", check=lambda m: len(m["v"]) >= 4
    )
    assert Redactor([pin])("pin 12 and pin 1234") == "pin 12 and pin [REDACTED:pin]"


def test_bad_patterns_are_rejected_clearly() -> None:
    with pytest.raises(ConfigError, match="not a valid regex"):
        RedactionPattern(name="bad", regex="(")
    with pytest.raises(ConfigError, match="no group 2"):
        RedactionPattern(name="bad", regex="(a)", group=2)
    with pytest.raises(ConfigError, match="no group 'v'"):
        RedactionPattern(name="bad", regex="(a)", group="v")
    with pytest.raises(ConfigError, match="name"):
        RedactionPattern(name="has space", regex="a")
    with pytest.raises(ConfigError, match="empty text"):
        RedactionPattern(name="greedy", regex="x*")
    with pytest.raises(ConfigError, match="regex must be a str"):
        RedactionPattern(name="bad", regex=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="flags must be an int"):
        RedactionPattern(name="bad", regex="a", flags="i")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="name"):
        RedactionPattern(name=5, regex="a")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="keywords"):
        RedactionPattern(name="bad", regex="a", keywords="a")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="keyword_first needs keywords"):
        RedactionPattern(name="bad", regex="a", keyword_first=True)
    with pytest.raises(ConfigError, match="check must be callable"):
        RedactionPattern(name="bad", regex="a", check="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="gate is not a valid regex"):
        RedactionPattern(name="bad", regex="a", gate="(")


def test_redacting_a_non_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="takes a str"):
        redact(None)  # type: ignore[arg-type]


def test_default_pattern_names_are_unique_and_documented() -> None:
    names = [p.name for p in DEFAULT_PATTERNS]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z_]+", n) for n in names)


# -- every write path stores the masked form ---------------------------------------------------

MDK = PROVIDERS["memdir_api_key"]
SECRETS_IN_CHAT = [
    PROVIDERS["sendgrid_key"],
    PROVIDERS["vault_token"],
    "S3cretPass99",
    PASSWORD,
    MDK,
]
CHAT_TEXT = (
    f"deploy with {PROVIDERS['sendgrid_key']} and {PROVIDERS['vault_token']}; "
    f"mysql -u root -pS3cretPass99; 数据库密码是 {PASSWORD}; the memory server key is {MDK}"
)


def _assert_masked(text: str) -> None:
    for secret in SECRETS_IN_CHAT:
        assert secret not in text
    assert "[REDACTED:sendgrid_key]" in text and "[REDACTED:vault_token]" in text
    assert "[REDACTED:memdir_api_key]" in text


def _files(ws: Workspace, pattern: str) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in ws.root.glob(pattern))


def test_memory_add_stores_the_masked_form(ws: Workspace) -> None:
    answer = memory_add(CHAT_TEXT, workspace=ws)
    assert not answer.startswith("Error")
    _assert_masked(_files(ws, "memory/*.md"))


async def test_a_flush_stores_the_masked_form_in_the_ledger(ws: Workspace) -> None:
    model = ScriptedModel([f"- {CHAT_TEXT}"])
    msgs = [Msg.user(CHAT_TEXT), Msg.assistant("noted")]
    result = await MemoryFlushManager(ws, model).flush_memories(msgs, session_id="s1")
    assert result.bullets and result.redacted == 1
    _assert_masked(_files(ws, "memory/*.md"))


async def test_consolidation_stores_the_masked_form_in_memory_md(ws: Workspace) -> None:
    append_bullets(ws, ["the deploy uses the staging database"], header="Memory Flush")

    def echo_secret(call: ModelCall) -> str:
        return f"# Memory\n\n- the deploy uses the staging database\n- {CHAT_TEXT}\n"

    result = await MemoryConsolidator(ws, FunctionModel(echo_secret)).consolidate()
    assert result.applied
    _assert_masked((ws.root / "MEMORY.md").read_text(encoding="utf-8"))


async def offload(ws: Workspace, text: str) -> str:
    """What compaction writes to the session log of a conversation that said ``text`` three
    ways: in a user message, in a tool call's input and in its output."""
    call = ToolUseBlock(id="c1", name="shell", input={"command": text})
    msgs = [
        Msg.user(text),
        Msg.assistant("on it", tool_calls=[call]),
        Msg.tool_result("c1", text),
        Msg.assistant("done"),
    ]
    msgs += [Msg.user(f"q{i}") if i % 2 == 0 else Msg.assistant(f"a{i}") for i in range(8)]
    summariser = FunctionModel(
        lambda c: "## SESSION INTENT\nx\n## SUMMARY\nx\n## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
    )
    config = CompactionConfig(trigger_messages=10, trigger_tokens=0, keep_messages=4)
    result = await ConversationCompactor(summariser, ws, config).compact_if_needed(
        msgs, session_id="s1"
    )
    assert result is not None
    return _files(ws, "sessions/*.jsonl")


async def test_the_session_log_offload_stores_the_masked_form(ws: Workspace) -> None:
    _assert_masked(await offload(ws, CHAT_TEXT))


def evict(ws: Workspace, text: str) -> tuple[str, str]:
    """The file an evicted tool result holding ``text`` is stored in, and its placeholder."""
    output = "log line\n" * 400 + text + "\nexit 0\n"
    msgs = [Msg.user("run it"), Msg.tool_result("c1", output, name="shell")]
    config = ToolResultEvictionConfig(max_result_chars=1_000, preview_chars=600)
    outcome = ToolResultEvictor(ws, config, session_id="s1").evict(msgs)
    (record,) = outcome.evicted
    stored = (ws.root / record.path).read_text(encoding="utf-8")
    assert stored.startswith("log line\n") and record.chars == len(stored)
    return stored, outcome.messages[1].tool_results[0].text


def test_an_evicted_tool_result_is_stored_masked(ws: Workspace) -> None:
    stored, placeholder = evict(ws, CHAT_TEXT)
    _assert_masked(stored)
    # The placeholder in the context previews the stored (masked) text.
    _assert_masked(placeholder)


def test_eviction_can_store_the_output_unmasked(ws: Workspace) -> None:
    output = CHAT_TEXT + "\n" + "x" * 2_000
    config = ToolResultEvictionConfig(max_result_chars=1_000, redactor=None)
    outcome = ToolResultEvictor(ws, config).evict([Msg.tool_result("c1", output, name="t")])
    assert (ws.root / outcome.evicted[0].path).read_text(encoding="utf-8") == output
    with pytest.raises(ConfigError, match="redactor"):
        ToolResultEvictionConfig(redactor="mask")  # type: ignore[arg-type]
