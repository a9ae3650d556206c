"""Secrets never reach memory files: redaction patterns, context kept, stability."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdir.errors import ConfigError
from memdir.redact import DEFAULT_PATTERNS, RedactionPattern, Redactor, redact

# Fake credentials assembled at run time, in the shapes the providers use.
OPENAI = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
ANTHROPIC = "sk-ant-api03-" + "x" * 40
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
SLACK = "xoxb-" + "1234567890-abcdefghij"
GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
HF = "hf_" + "a" * 34
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"


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
    ],
)
def test_each_kind_of_secret_is_masked(text: str, secret: str, kind: str) -> None:
    out = redact(text)
    assert secret not in out
    assert "[REDACTED:" in out
    assert f"[REDACTED:{kind}]" in out
    assert Redactor().findings(text).get(kind, 0) >= 1


def test_context_around_the_secret_is_kept() -> None:
    assert redact("password=hunter2") == "password=[REDACTED:assignment]"
    url = redact("clone https://bob:pa55word@git.example.com/repo.git")
    assert url == "clone https://bob:[REDACTED:url_password]@git.example.com/repo.git"
    assert redact("Authorization: Bearer abcdefghijklmnop1234") == (
        "Authorization: Bearer [REDACTED:bearer_token]"
    )


def test_private_key_blocks_are_masked_whole_even_unterminated() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----"
    out = redact(f"key:\n{block}\nafter")
    assert "MIIEowIBAAKCAQEA" not in out
    assert out.endswith("[REDACTED:private_key]\nafter")
    cut = redact("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt\nmore")
    assert "b3BlbnNzaC1rZXkt" not in cut


@pytest.mark.parametrize(
    "text",
    [
        "Alice prefers green tea and works on Project X.",
        "set max_tokens=4000 and temperature=0.2",
        "The meeting is at 10:30 with Bob (bob@example.com).",
        "see https://example.com/path?q=1",
        "用户喜欢喝绿茶，项目截止日期是 2026-12-01。",
        "the author: Jane Doe",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact(text) == text


@given(st.text(max_size=300))
def test_redaction_is_stable(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@given(st.sampled_from([OPENAI, GITHUB, JWT, AWS_ID, "password=hunter2"]), st.text(max_size=50))
def test_secret_in_any_surrounding_is_masked(secret: str, noise: str) -> None:
    out = redact(f"{noise} {secret} {noise}")
    assert secret not in out or secret in noise


def test_custom_patterns_extend_the_list() -> None:
    acme = RedactionPattern(name="acme", regex=r"acme_[0-9a-f]{16}")
    redactor = Redactor(extra=[acme])
    assert redactor("k=acme_0123456789abcdef") == "k=[REDACTED:acme]"
    assert redactor.findings("acme_0123456789abcdef and acme_fedcba9876543210") == {"acme": 2}
    assert len(redactor.patterns) == len(DEFAULT_PATTERNS) + 1


def test_bad_patterns_are_rejected_clearly() -> None:
    with pytest.raises(ConfigError, match="not a valid regex"):
        RedactionPattern(name="bad", regex="(")
    with pytest.raises(ConfigError, match="no group 2"):
        RedactionPattern(name="bad", regex="(a)", group=2)
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


def test_redacting_a_non_string_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="takes a str"):
        redact(None)  # type: ignore[arg-type]


def test_default_pattern_names_are_unique_and_documented() -> None:
    names = [p.name for p in DEFAULT_PATTERNS]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z_]+", n) for n in names)


# Each built-in pattern once more with a flag that changes nothing, so no shortcut applies.
_UNGATED = Redactor(
    [
        RedactionPattern(name=p.name, regex=p.regex, group=p.group, flags=p.flags | re.UNICODE)
        for p in DEFAULT_PATTERNS
    ]
)
_PIECES = [
    OPENAI, ANTHROPIC, GITHUB, AWS_ID, AWS_SECRET, JWT, SLACK, GOOGLE, HF, STRIPE,
    "password", "PassWord", "paſſword", "prİvate_key", "API-KEY", "Token", "auth", "secret",
    "aws_secret_access_key", "Bearer ", "Authorization: basic ", "https://bob:", "@host",
    "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "=", ": ", '"', "'",
    " ", "\n", "hunter2", "abc123XYZ789", "用户", "\u212a",
]  # fmt: skip


@given(st.lists(st.sampled_from(_PIECES), max_size=12))
def test_skipping_patterns_that_cannot_match_changes_nothing(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert redact(text) == _UNGATED.redact(text)
    assert Redactor().findings(text) == _UNGATED.findings(text)


def test_case_folding_letters_do_not_hide_a_keyword() -> None:
    # Under re.IGNORECASE "ſ" matches "s" and the Kelvin sign matches "k".
    assert "hunter22" not in redact("paſſword=hunter22")
    assert "abcdef123" not in redact("to\u212aen: abcdef123")
