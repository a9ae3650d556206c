"""Mask secrets before text is persisted (ledgers, ``MEMORY.md``, session logs, evicted results).

Memory files outlive the conversation that produced them and are re-injected into future
prompts, so an API key pasted into a chat must not be copied into them. :func:`redact`
replaces each secret with ``[REDACTED:<kind>]``, keeping the text around it; the result is
stable (redacting twice changes nothing).

Three kinds of rules (:data:`DEFAULT_PATTERNS`):

* **provider formats** — tokens with a documented prefix and shape (``sk-ant-…``, ``ghp_…``,
  ``SG.….…``, ``hvs.…``, ``AKIA…``): masked wherever they appear;
* **credential pairs** — a secret issued with a key id (AWS, Alibaba Cloud, Tencent Cloud,
  Twilio), random characters with no prefix: masked where a token of its exact shape stands
  next to the id (same or next line), unless the words before it name it as other data;
* **context** — a value after a keyword, flag or header (``password=…``, ``--password …``,
  ``Cookie: sessionid=…``, ``.netrc``, ``redis://:pw@host``, ``密码：…``, "the root password
  is …"): masked only when the value itself looks like a secret, so ``token =
  tokenizer.encode(text)``, ``PWD=/home/dana`` and "Reset password: click the link" are kept.

Every pattern names the cheap literals (``keywords``) one of which each match contains; text
without any is not scanned by it, which keeps masking fast on text without secrets.

The pattern list is plain data. Extend it for your own token formats::

    from memdir.redact import RedactionPattern, Redactor

    redactor = Redactor(extra=[RedactionPattern(name="acme", regex=r"acme_[0-9a-f]{32}",
                                                keywords=("acme_",))])
    SessionLog(ws, "s1", redact=redactor)
"""

from __future__ import annotations

from memdir.redact._engine import RedactionPattern
from memdir.redact._redactor import Redactor
from memdir.redact._rules import DEFAULT_PATTERNS

__all__ = ["DEFAULT_PATTERNS", "RedactionPattern", "Redactor", "redact"]

_DEFAULT = Redactor(DEFAULT_PATTERNS)


def redact(text: str) -> str:
    """Mask secrets in ``text`` with the built-in patterns (see :class:`Redactor`)."""
    return _DEFAULT.redact(text)
