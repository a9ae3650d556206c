"""Provider tokens: formats a provider documents, each gated by its literal prefix.

Each rule is written from the provider's published token format (prefix, alphabet, length);
the approach — a distinctive prefix as a cheap keyword, then an exact shape — follows the rule
sets of established secret scanners (gitleaks, detect-secrets, GitHub secret scanning), but
the regexes are memdir's own. A prefix that also starts ordinary words (``sk-``) is confirmed
by the randomness of what follows, so ``pip install sk-video-tools`` is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from memdir.redact._engine import RedactionPattern, Span
from memdir.redact._values import longest_run_is_random

__all__ = [
    "ALIBABA_KEY",
    "AWS_KEY_ID",
    "PROVIDER_PATTERNS",
    "TENCENT_KEY",
    "TWILIO_ACCOUNT",
    "TWILIO_KEY",
]


def _random_body(match: re.Match[str]) -> bool:
    return longest_run_is_random(match.group(0))


_OPENAI_KINDS = ("sk-proj-", "sk-svcacct-", "sk-admin-")


def _openai(match: re.Match[str]) -> bool:
    # A project, service account or admin key is named by its prefix; the bare ``sk-`` also
    # starts package and product names (``sk-video-tools``), so there the body must be random.
    return match.group(0).startswith(_OPENAI_KINDS) or _random_body(match)


def _p(
    name: str, regex: str, *keywords: str, random: bool = False, first: bool = True
) -> RedactionPattern:
    """A token rule; ``first``: every match starts with one of the ``keywords``."""
    return RedactionPattern(
        name=name,
        regex=regex,
        keywords=keywords,
        keyword_first=first and bool(keywords),
        in_token=True,
        check=_random_body if random else None,
    )


_TOKEN_CHAR = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _word_char_before(text: str, at: int) -> bool:
    return at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_")


def _mailgun_spans(match: re.Match[str]) -> Iterator[Span]:
    if match.group().startswith("key-"):
        yield match.span()
        return
    start = match.start() - 32  # the regex starts at the dash after the 32 hex digits
    if not _word_char_before(match.string, start):
        yield start, match.end()


# Both regexes start with a literal (``key-``, ``-``, ``.``), so re finds candidates with a fast
# scan instead of trying every position; the part before is checked by looking back.
MAILGUN = RedactionPattern(
    # key-<32 hex>, and the newer private keys <32 hex>-<8 hex>-<8 hex>
    name="mailgun_key",
    regex=r"key-(?<!\wkey-)[0-9a-f]{32}\b|-(?<=[0-9a-f]{32}-)[0-9a-f]{8}-[0-9a-f]{8}\b",
    keywords=("-",),
    in_token=True,
    spans=_mailgun_spans,
)


def _discord_spans(match: re.Match[str]) -> Iterator[Span]:
    text, start = match.string, match.start()
    while start > 0 and text[start - 1] in _TOKEN_CHAR and match.start() - start < 29:
        start -= 1
    head = match.start() - start
    if (
        24 <= head <= 28
        and text[start] in "MNO"
        and not (start > 0 and text[start - 1] in _TOKEN_CHAR)
    ) and longest_run_is_random(text[start : match.end()]):
        yield start, match.end()


DISCORD = RedactionPattern(
    # a base64 user id (24-28 characters, from M, N or O), a timestamp, an HMAC
    name="discord_token",
    regex=r"\.(?<=[A-Za-z0-9_-]{24}\.)[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])",
    in_token=True,
    spans=_discord_spans,
)

# Key ids issued with a secret (memdir.redact._pairs finds the secret next to them).
AWS_KEY_ID = _p(
    "aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", "akia", "asia", "abia", "acca"
)
ALIBABA_KEY = _p("alibaba_key", r"\bLTAI[A-Za-z0-9]{12,20}\b", "ltai", random=True)
TENCENT_KEY = _p("tencent_key", r"\bAKID[A-Za-z0-9]{32}\b", "akid", random=True)
TWILIO_KEY = _p("twilio_key", r"\bSK[0-9a-fA-F]{32}\b", "sk", random=True)
# An account SID is not secret alone, but it is the name its auth token is used with.
TWILIO_ACCOUNT = _p("twilio_account_sid", r"\bAC[0-9a-f]{32}\b", "ac", random=True)

# Most specific first: ``sk-ant-`` before ``sk-``, Square's ``EAAA`` before Meta's ``EAA``.
PROVIDER_PATTERNS: tuple[RedactionPattern, ...] = (
    # memdir's own API keys (memdir serve): mdk_<key id, 16 base32>_<secret, 32 bytes base64url>
    _p("memdir_api_key", r"\bmdk_[a-z2-7]{16}_[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])", "mdk_"),
    _p("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "eyj"),
    # AI providers
    _p("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", "sk-ant-"),
    _p("mapbox_token", r"\bsk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", "sk.eyj"),
    RedactionPattern(
        name="openai_key",
        regex=r"\bsk-[A-Za-z0-9_-]{20,}",
        keywords=("sk-",),
        keyword_first=True,
        in_token=True,
        check=_openai,
    ),
    _p("groq_key", r"\bgsk_[A-Za-z0-9]{48,}", "gsk_"),
    _p("replicate_token", r"\br8_[A-Za-z0-9]{37}\b", "r8_"),
    _p("perplexity_key", r"\bpplx-[A-Za-z0-9]{40,}", "pplx-"),
    _p("xai_key", r"\bxai-[A-Za-z0-9]{70,}", "xai-"),
    _p("huggingface_token", r"\b(?:hf|api_org)_[A-Za-z0-9]{30,}", "hf_", "api_org_"),
    _p("langsmith_key", r"\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}\b", "lsv2_"),
    # code hosting, CI and registries
    _p(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
    ),
    _p(
        "gitlab_token",
        r"\bgl(?:pat|dt|rt|ptt|ft|imt|cbt|oas|soat|agent)-[A-Za-z0-9_-]{20,}",
        "glpat-",
        "gldt-",
        "glrt-",
        "glptt-",
        "glft-",
        "glimt-",
        "glcbt-",
        "gloas-",
        "glsoat-",
        "glagent-",
    ),
    _p("bitbucket_password", r"\bATBB[A-Za-z0-9_=.-]{32,}", "atbb"),
    _p("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", "npm_"),
    _p("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", "pypi-age"),
    _p("rubygems_key", r"\brubygems_[a-f0-9]{48}\b", "rubygems_"),
    _p("docker_token", r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}", "dckr_"),
    _p("artifactory_key", r"\bAKCp[A-Za-z0-9]{69}\b", "akcp"),
    _p("nuget_key", r"\boy2[a-z0-9]{43}\b", "oy2"),
    _p("clojars_token", r"\bCLOJARS_[a-z0-9]{60}\b", "clojars_"),
    _p("buildkite_token", r"\bbkua_[a-f0-9]{40}\b", "bkua_"),
    _p("circleci_token", r"\bCCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}\b", "ccipat_"),
    _p("sourcegraph_token", r"\bsgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}\b", "sgp_"),
    _p(
        "terraform_token", r"\b[a-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}", ".atlasv1.", first=False
    ),
    _p("pulumi_token", r"\bpul-[a-f0-9]{40}\b", "pul-"),
    _p("vault_token", r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}", "hvs.", "hvb.", "hvr."),
    _p("doppler_token", r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}", "dp."),
    _p(
        "age_key", r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b", "age-secret-key-1"
    ),
    _p("onepassword_token", r"\bops_eyJ[A-Za-z0-9+/=_-]{100,}", "ops_eyj"),
    _p(
        "tailscale_key",
        r"\btskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]+-[A-Za-z0-9]{20,}",
        "tskey-",
    ),
    # chat, mail and messaging
    _p(
        "slack_token",
        r"\bxox[abprse]-[0-9]{6,}-[A-Za-z0-9-]{8,}|\bxoxe\.xox[bp]-[0-9]-[A-Za-z0-9-]{40,}"
        r"|\bxapp-[0-9]-[A-Z0-9]{6,}-[0-9]{6,}-[a-f0-9]{32,}",
        "xox",
        "xapp-",
    ),
    RedactionPattern(
        name="slack_webhook",
        regex=r"(hooks\.slack\.com/(?:services|workflows|triggers)/)([A-Za-z0-9_/+-]{20,})",
        group=2,
        keywords=("hooks.slack.com",),
        keyword_first=True,
        in_token=True,
    ),
    RedactionPattern(
        name="discord_webhook",
        regex=r"(discord(?:app)?\.com/api/webhooks/[0-9]+/)([A-Za-z0-9_-]{60,})",
        group=2,
        keywords=("discord",),
        keyword_first=True,
        in_token=True,
    ),
    DISCORD,
    _p("telegram_token", r"\b[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])", ":aa", first=False),
    _p("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])", "sg."),
    MAILGUN,
    _p("mailchimp_key", r"\b[0-9a-f]{32}-us[0-9]{1,2}\b", "-us", first=False),
    TWILIO_KEY,
    TWILIO_ACCOUNT,
    _p("postman_key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b", "pmak-"),
    _p("fcm_key", r"\bAAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,}", ":apa91b", first=False),
    # payments and commerce
    _p(
        "stripe_key",
        r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
        "sk_live_",
        "sk_test_",
        "rk_live_",
        "rk_test_",
        "pk_live_",
        "pk_test_",
    ),
    _p("stripe_webhook_secret", r"\bwhsec_[A-Za-z0-9+/=]{24,}", "whsec_"),
    _p(
        "square_token",
        r"\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,}|\bEAAA[A-Za-z0-9_-]{60,}",
        "sq0",
        "eaaa",
    ),
    _p("facebook_token", r"\bEAA[A-Za-z0-9]{90,}", "eaa", random=True),
    _p("shopify_token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", "shp"),
    _p("razorpay_key", r"\brzp_(?:live|test)_[A-Za-z0-9]{14,}", "rzp_"),
    _p("flutterwave_key", r"\bFLWSECK(?:_TEST)?-[a-f0-9]{32}-X\b", "flwseck"),
    _p("shippo_token", r"\bshippo_(?:live|test)_[a-f0-9]{40}\b", "shippo_"),
    _p("easypost_key", r"\bEZ[AT]K[a-f0-9]{54}\b", "ezak", "eztk"),
    _p("duffel_token", r"\bduffel_(?:test|live)_[A-Za-z0-9_=-]{43}", "duffel_"),
    # cloud and infrastructure
    AWS_KEY_ID,
    _p("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", "aiza"),
    _p(
        "google_oauth",
        r"\bGOCSPX-[A-Za-z0-9_-]{28}(?![A-Za-z0-9_-])|\bya29\.[0-9A-Za-z_-]{20,}"
        r"|(?<![A-Za-z0-9/])1//0[0-9A-Za-z_-]{40,}",
        "gocspx-",
        "ya29.",
        "1//0",
    ),
    ALIBABA_KEY,
    TENCENT_KEY,
    _p("digitalocean_token", r"\bdo[opr]_v1_[a-f0-9]{64}\b", "dop_v1_", "doo_v1_", "dor_v1_"),
    _p("databricks_token", r"\bdapi[a-f0-9]{32}(?:-[0-9])?\b", "dapi"),
    _p("heroku_key", r"\bHRKU-[A-Za-z0-9_-]{58,}", "hrku-"),
    _p(
        "supabase_token",
        r"\bsb[pa]_[a-f0-9]{40}\b|\bsb_secret_[A-Za-z0-9_-]{20,}",
        "sbp_",
        "sba_",
        "sb_secret_",
    ),
    _p("planetscale_token", r"\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}", "pscale_"),
    _p("netlify_token", r"\bnfp_[A-Za-z0-9]{36}\b", "nfp_"),
    _p(
        "fly_token",
        r"\bfo1_[A-Za-z0-9_-]{43}|\bfm[12][ar]?_[A-Za-z0-9+/=_-]{40,}",
        "fo1_",
        "fm1",
        "fm2",
    ),
    _p(
        "azure_client_secret",
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        "q~",
        first=False,
    ),
    _p("contentful_token", r"\bCFPAT-[A-Za-z0-9_-]{43}", "cfpat-"),
    # observability and productivity
    _p(
        "grafana_token",
        r"\bglc_[A-Za-z0-9+/]{32,}={0,2}|\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b",
        "glc_",
        "glsa_",
    ),
    _p("sentry_token", r"\bsntry[us]_[A-Za-z0-9+/=_-]{40,}", "sntry"),
    _p("newrelic_key", r"\bNR(?:AK|II)-[A-Za-z0-9_-]{27,32}\b", "nrak-", "nrii-"),
    _p("dynatrace_token", r"\bdt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}\b", "dt0c01."),
    _p("atlassian_token", r"\bATATT3[A-Za-z0-9_=-]{150,}", "atatt3"),
    _p("linear_key", r"\blin_api_[A-Za-z0-9]{40}\b", "lin_api_"),
    _p(
        "notion_token",
        r"\bntn_[0-9]{11}[A-Za-z0-9]{35}\b|\bsecret_[A-Za-z0-9]{43}\b",
        "ntn_",
        "secret_",
    ),
    _p("figma_token", r"\bfig[dou]_[A-Za-z0-9_-]{40,}", "fig"),
    _p("prefect_key", r"\bpnu_[A-Za-z0-9]{36}\b", "pnu_"),
    _p("readme_key", r"\brdme_[a-z0-9]{70}\b", "rdme_"),
    _p("typeform_token", r"\btfp_[A-Za-z0-9_.=-]{59}", "tfp_"),
    _p("adafruit_key", r"\baio_[A-Za-z0-9]{28}\b", "aio_"),
    _p("infracost_key", r"\bico-[A-Za-z0-9]{32}\b", "ico-"),
)
