"""A credential pair never leaks its secret half: the secret is masked next to its key id.

Twilio (account SID ``AC…`` + auth token; API key ``SK…`` + secret), Alibaba Cloud (``LTAI…`` +
AccessKey secret), Tencent Cloud (``AKID…`` + SecretKey) and AWS, in the layouts people paste
them in, through every path that writes memory; and text that only looks like a pair (data
next to an id, ids without their secret, hex colours, hashes, UUIDs, Chinese text) keeps its
words.
"""

from __future__ import annotations

import importlib.util
import random
import string
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir.cli import cli
from memdir.memory import MemoryConsolidator, MemoryFlushManager
from memdir.messages import Msg
from memdir.models import model_from_string
from memdir.redact import Redactor, redact
from memdir.store.ledger import append_bullets
from memdir.testing import FunctionModel, ModelCall, ScriptedModel
from memdir.tools import memory_add
from memdir.tools._core import close_shared_indexes
from memdir.workspace import Workspace
from test_redact import _files, evict, offload

_RNG = random.Random(20261130)
AN = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPNUM = string.ascii_uppercase + string.digits


def fake(chars: str, n: int, prefix: str = "") -> str:
    """Random characters in a provider's alphabet; with letters of both cases where it has them."""
    while True:
        value = "".join(_RNG.choice(chars) for _ in range(n))
        cases = [str.isdigit, *((str.islower, str.isupper) if chars == AN else (str.isalpha,))]
        if all(any(test(c) for c in value) for test in cases):
            return prefix + value


# kind of id, kind of secret, a fresh (id, secret), and the key names a config gives them
PAIRS: dict[str, tuple[str, str, Callable[[], tuple[str, str]], tuple[str, str]]] = {
    "twilio_auth": (
        "twilio_account_sid",
        "twilio_auth_token",
        lambda: (fake(HEX, 32, "AC"), fake(HEX, 32)),
        ("accountSid", "authToken"),
    ),
    "twilio_api_key": (
        "twilio_key",
        "twilio_key_secret",
        lambda: (fake(HEX, 32, "SK"), fake(AN, 32)),
        ("apiKey", "apiSecret"),
    ),
    "alibaba": (
        "alibaba_key",
        "alibaba_secret",
        lambda: (fake(AN, 20, "LTAI"), fake(AN, 30)),
        ("accessKeyId", "accessKeySecret"),
    ),
    "tencent": (
        "tencent_key",
        "tencent_secret",
        lambda: (fake(AN, 32, "AKID"), fake(AN, 32)),
        ("SecretId", "SecretKey"),
    ),
    "aws": (
        "aws_access_key",
        "aws_secret_key",
        lambda: (fake(UPNUM, 16, "AKIA"), fake(AN + "/+", 40)),
        ("aws_access_key_id", "aws_secret_access_key"),
    ),
}

# How a pair is pasted; ``{i}`` the id, ``{s}`` the secret, ``{ik}``/``{sk}`` their key names.
LAYOUTS = [
    "{i} {s}",
    "{i}:{s}",
    "{i} / {s}",
    "keys: {i}, {s} (rotated today)",
    "{i}\n{s}",
    "{s}\n\n{i}\n",
    "Key ID,Secret\n{i},{s}\n",
    "User name,Key ID,Secret\nops@example.com,{i},{s}",
    "| id | secret |\n|---|---|\n| {i} | {s} |",
    "id {i} secret {s}",
    "client = Client('{i}', '{s}')",
    'creds = {{"{ik}": "{i}", "{sk}": "{s}"}}',
    '{{\n  "{ik}": "{i}",\n  "{sk}": "{s}"\n}}',
    "{ik}={i}\n{sk}={s}",
    "export KEY_ID={i}\nexport KEY_VALUE={s}",
    "mytool configure --id {i} --value {s}",
    "curl -u {i}:{s} https://api.example.com/v1/",
    "https://{i}:{s}@api.example.com/",
    "{s} is the secret of {i}",
    "the second key is {i} and its secret is {s}.",
    "凭证：{i}，{s}，请保管好",
    "キー {i} とシークレット {s}",
]


@pytest.fixture(autouse=True)
def _close_indexes() -> Iterator[None]:
    yield
    close_shared_indexes()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("pair", list(PAIRS))
def test_both_halves_of_a_pair_are_masked(pair: str, layout: str) -> None:
    id_kind, secret_kind, make, (id_key, secret_key) = PAIRS[pair]
    key_id, secret = make()
    text = layout.format(i=key_id, s=secret, ik=id_key, sk=secret_key)
    out = redact(text)
    assert key_id not in out and secret not in out, out
    assert f"[REDACTED:{id_kind}]" in out
    # Named by its pair unless another rule (a key name, a flag, a URL) named it first.
    assert out.count("[REDACTED:") == 2, out
    if layout.startswith(("{i} {s}", "Key ID,Secret", "{i}\n")):
        assert f"[REDACTED:{secret_kind}]" in out, out


def test_the_reported_layouts_come_out_as_expected() -> None:
    sid, token = "AC" + "3f9e0a1b2c4d5e6f7a8b9c0d1e2f3a4b", "8c1e5a9f0b7d3c2e4f6a8b0c9d1e3f5a"
    key, key_secret = "SK" + "0a1b2c3d4e5f60718293a4b5c6d7e8f9", "Xq7LmN2pRt9vWz4yBc6dFg8hJk1sTu3A"
    ali, ali_secret = "LTAI5tQk9Rz2Wm7Xp3Lv8NcY", "Hq4Tz9Lm2Vw7Rk1Xb6Np3Jd8Fs5Gy0"
    cases = {
        f"TWILIO_ACCOUNT_SID={sid}\nTWILIO_AUTH_TOKEN={token}": (
            "TWILIO_ACCOUNT_SID=[REDACTED:twilio_account_sid]\n"
            "TWILIO_AUTH_TOKEN=[REDACTED:twilio_auth_token]"
        ),
        f"client = Client('{key}', '{key_secret}', '{sid}')": (
            "client = Client('[REDACTED:twilio_key]', '[REDACTED:twilio_key_secret]', "
            "'[REDACTED:twilio_account_sid]')"
        ),
        f'{{"accessKeyId": "{ali}", "accessKeySecret": "{ali_secret}"}}': (
            '{"accessKeyId": "[REDACTED:alibaba_key]", '
            '"accessKeySecret": "[REDACTED:alibaba_secret]"}'
        ),
        f"AccessKey ID,AccessKey Secret\n{ali},{ali_secret}": (
            "AccessKey ID,AccessKey Secret\n[REDACTED:alibaba_key],[REDACTED:alibaba_secret]"
        ),
        f"aliyun configure --access-key-id {ali} --access-key-secret {ali_secret}": (
            "aliyun configure --access-key-id [REDACTED:alibaba_key] "
            "--access-key-secret [REDACTED:alibaba_secret]"
        ),
    }
    for text, expected in cases.items():
        assert redact(text) == expected
    assert Redactor().findings(f"{sid} {token}") == {
        "twilio_auth_token": 1,
        "twilio_account_sid": 1,
    }


# -- what only looks like a pair keeps its words ---------------------------------------------


def _uuid() -> str:
    return str(uuid.UUID(int=_RNG.getrandbits(128), version=4))


# Lines with no key id: they must come out exactly as they went in.
LOOKALIKES: list[Callable[[], str]] = [
    lambda: "the AC adapter for the meeting room projector is broken",
    lambda: f"color: #{fake(HEX, 6)}; border: 1px solid #AC{fake(HEX, 4).upper()}",
    lambda: f"ACME-{_RNG.randint(100, 9999)} was closed by {_RNG.choice(['dana', 'wei'])}",
    lambda: f"commit {fake(HEX, 40)} fixes the AC power readings",
    lambda: f"{fake(HEX, 64)}  release-2.4.1.tar.gz",
    lambda: f"sha256sum: {fake(HEX, 64)}",
    lambda: f"request {_uuid()} took {_RNG.randint(1, 900)} ms",
    lambda: f"trace {fake(HEX, 32)} span {fake(HEX, 16)}",
    lambda: f"part AC{fake(HEX, 32).upper()} in stock",
    lambda: f"ac{fake(HEX, 32)} is the cache key of the thumbnail",
    lambda: "LTAI keys rotate every 90 days; ask ops for a new one",
    lambda: "SK hynix ships 32 GB modules; AKID is Tencent's prefix",
    lambda: f"订单号 {fake(HEX, 32)} 已发货，用户 {_RNG.randint(10**7, 10**8)} 已确认",
    lambda: f"用户 ID {_uuid()} 的会话 {fake(HEX, 32)} 已过期",
    lambda: f"工单 AC-{_RNG.randint(1000, 9999)}：空调（AC）维修，提交 {fake(HEX, 7)}",
    lambda: f"{fake(AN, 30)} is a 30-character sample string in the fixtures",
    lambda: f"InternalAccountingServiceNames and {fake(AN, 32)} are test names",
    lambda: f"- 09:41 deploy {fake(HEX, 7)} to staging ({_uuid()})",
]

# Lines with a key id and data that is not its secret: only the id goes.
NEAR_AN_ID: list[Callable[[str], str]] = [
    lambda i: f"{i} request_id={fake(HEX, 32)} status=200",
    lambda i: f"export for {i}: md5 {fake(HEX, 32)}",
    lambda i: f"{i}\n{fake(HEX, 32)}  export-2026-11.csv",
    lambda i: (
        f"{i}\nthe meeting moved to Friday\nblob {fake(AN, 30)}{fake(AN, 10)} {fake(HEX, 32)}"
    ),
    lambda i: f"{i} commit {fake(HEX, 40)}",
    lambda i: f"{i} RequestId: {_uuid().upper()}",
    lambda i: f"trace_id={fake(HEX, 32)} account={i}",
    lambda i: f"{i} etag: {fake(HEX, 32)}",
    lambda i: f"{i} sha256:{fake(HEX, 64)}",
    lambda i: f"{i} uploads/{fake(HEX, 32)}/a.png",
    lambda i: f"{i} color #{fake(HEX, 6)}",
    lambda i: f"{i} belongs to ProductionDeployServiceRoleNames",
    lambda i: f"账号 {i} 的用户 {fake(HEX, 32)} 已停用",
    lambda i: f"{i}, message SM{fake(HEX, 32)} delivered",
    lambda i: f"https://api.twilio.com/2010-04-01/Accounts/{i}/Calls/CA{fake(HEX, 32)}.json",
    lambda i: f"{i} {fake(HEX, 31)} {fake(AN, 29)} {fake(AN, 33)}",
]


def test_lookalikes_keep_every_word() -> None:
    changed = [line for make in LOOKALIKES for _ in range(40) if redact(line := make()) != line]
    assert changed == []


@pytest.mark.parametrize("pair", list(PAIRS))
def test_data_next_to_a_key_id_is_kept(pair: str) -> None:
    id_kind, _, make, _ = PAIRS[pair]
    wrong = []
    for template in NEAR_AN_ID:
        for _ in range(10):
            key_id = make()[0]
            text = template(key_id)
            if redact(text) != text.replace(key_id, f"[REDACTED:{id_kind}]"):
                wrong.append((text, redact(text)))
    assert wrong == []


def _benchmark_corpus() -> object:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "_redact_corpus.py"
    spec = importlib.util.spec_from_file_location("_redact_corpus_for_tests", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_benign_lines_are_all_kept() -> None:
    corpus = _benchmark_corpus()
    benign = [item.text for split in ("dev", "held-out") for item in corpus.benign_items(split)]  # type: ignore[attr-defined]
    assert len(benign) == 4_800
    assert [line for line in benign if redact(line) != line] == []


# -- every write path stores both halves masked ---------------------------------------------


def _pairs_text() -> tuple[str, list[str]]:
    """Three pairs in three layouts, and the six values that must not be stored."""
    sid, token = PAIRS["twilio_auth"][2]()
    key, key_secret = PAIRS["twilio_api_key"][2]()
    ali, ali_secret = PAIRS["alibaba"][2]()
    text = (
        f"Twilio for the SMS reminders: account {sid}, auth token {token}\n"
        f"Twilio API key {key} with secret {key_secret}\n"
        f"Alibaba console CSV: AccessKey ID,AccessKey Secret / {ali},{ali_secret}"
    )
    return text, [sid, token, key, key_secret, ali, ali_secret]


def _assert_masked(stored: str, values: list[str]) -> None:
    assert stored
    leaked = [v for v in values if v in stored]
    assert leaked == [], stored
    for kind in ("twilio_auth_token", "twilio_key_secret", "alibaba_secret", "alibaba_key"):
        assert f"[REDACTED:{kind}]" in stored, stored


def test_memory_add(ws: Workspace) -> None:
    text, values = _pairs_text()
    assert memory_add(text, workspace=ws).startswith("Saved 3 bullets")
    _assert_masked(_files(ws, "memory/*.md"), values)


def test_memdir_add_from_stdin(ws: Workspace) -> None:
    text, values = _pairs_text()
    result = CliRunner().invoke(cli, ["-w", str(ws.root), "add", "-"], input=text)
    assert result.exit_code == 0, result.output
    _assert_masked(_files(ws, "memory/*.md"), values)


async def test_flush(ws: Workspace) -> None:
    text, values = _pairs_text()

    def echo(call: ModelCall) -> str:
        # A model that writes down what it was shown, one half of a pair per bullet.
        shown = call.last_user_text.replace(", auth", "\nauth").replace(" with secret", "\nsecret")
        keep = ("Twilio", "auth token", "secret", "Alibaba")
        return "\n".join(f"- {line}" for line in shown.splitlines() if line.startswith(keep))

    model = FunctionModel(echo)
    msgs = [Msg.user(text), Msg.assistant("noted")]
    result = await MemoryFlushManager(ws, model).flush_memories(msgs, session_id="s1")
    assert len(result.bullets) >= 4
    _assert_masked(_files(ws, "memory/*.md"), values)
    assert not [v for v in values if v in model.calls[0].last_user_text]  # what it was shown


async def test_flush_masks_a_pair_the_model_writes_itself(ws: Workspace) -> None:
    # Not taken from the (masked) conversation: each bullet carries its whole pair.
    text, values = _pairs_text()
    answer = "\n".join(f"- {line}" for line in text.splitlines())
    msgs = [Msg.user("set up the SMS reminders"), Msg.assistant("done")]
    result = await MemoryFlushManager(ws, ScriptedModel([answer])).flush_memories(
        msgs, session_id="s1"
    )
    assert result.redacted == 3
    _assert_masked(_files(ws, "memory/*.md"), values)


async def test_flush_with_the_offline_model(ws: Workspace) -> None:
    # It reads the messages themselves and keeps one sentence a bullet: the id in one, the
    # secret in the next.
    sid, token = PAIRS["twilio_auth"][2]()
    ali, ali_secret = PAIRS["alibaba"][2]()
    said = (
        f"Remember: the Twilio account for the SMS team is {sid}. I always use {token} with it "
        f"for the reminders.\nMy Alibaba AccessKey ID is {ali} and I decided to rotate it "
        f"monthly.\nI prefer to keep {ali_secret} in the team vault from now on."
    )
    manager = MemoryFlushManager(ws, model_from_string("extractive"))
    result = await manager.flush_memories([Msg.user(said), Msg.assistant("ok")], session_id="s1")
    assert len(result.bullets) >= 3
    stored = _files(ws, "memory/*.md")
    assert not [v for v in (sid, token, ali, ali_secret) if v in stored], stored
    assert "[REDACTED:twilio_auth_token]" in stored and "[REDACTED:alibaba_secret]" in stored


async def test_consolidation(ws: Workspace) -> None:
    text, values = _pairs_text()
    append_bullets(ws, ["the SMS reminders go out through Twilio"], header="Memory Flush")

    def echo(call: ModelCall) -> str:
        bullets = "\n".join(f"- {line}" for line in text.splitlines())
        return f"# Memory\n\n- the SMS reminders go out through Twilio\n{bullets}\n"

    result = await MemoryConsolidator(ws, FunctionModel(echo)).consolidate()
    assert result.applied
    _assert_masked((ws.root / "MEMORY.md").read_text(encoding="utf-8"), values)


async def test_session_log_offload(ws: Workspace) -> None:
    text, values = _pairs_text()
    logged = await offload(ws, text)
    _assert_masked(logged, values)
    assert logged.count("[REDACTED:twilio_auth_token]") == 3  # text, tool input, tool output


def test_eviction(ws: Workspace) -> None:
    text, values = _pairs_text()
    stored, placeholder = evict(ws, text)
    _assert_masked(stored, values)
    assert not [v for v in values if v in placeholder]
