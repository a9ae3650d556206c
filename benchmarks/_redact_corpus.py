# ruff: noqa: E501 - tables of formats and carriers read best one to a line
"""A labelled corpus for secret masking: fake secrets of real shapes, and benign lines.

Everything is generated from a seed; no value is a real credential (random characters in the
shape a provider documents). The corpus has two halves that share no carrier or template:
``dev`` (seed 1, even-numbered templates) is the half detection rules may be checked against
while they are written; ``held-out`` (seed 2, odd-numbered templates) is only reported.

* **Secrets**: one item per (format, carrier): the text, and the substrings that must not
  survive. Provider formats are placed in carriers people paste (env files, JSON, shell,
  chat in English, Chinese and Japanese); credentials without a prefix come with the context
  that makes them one (``mysql -p…``, ``.netrc``, ``Cookie:``, ``密码：``…).
* **Benign, plain data**: SHAs, UUIDs, base64, hashes, URLs, digests, log lines.
* **Benign, with keywords**: prose, code, env and YAML lines in English, Chinese, Japanese and
  Korean that use words like password, token, secret, key, 密码, 令牌 without holding a secret.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
AN = LOWER + UPPER + DIGITS
HEX = DIGITS + "abcdef"
UPNUM = UPPER + DIGITS
URLSAFE = AN + "_-"
B64 = AN + "+/"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l".upper()

SPLITS = ("dev", "held-out")


@dataclass(frozen=True, slots=True)
class Item:
    """One labelled text: ``secrets`` empty for a benign line."""

    format: str
    text: str
    secrets: tuple[str, ...] = ()


def _r(rng: random.Random, chars: str, n: int) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


def _mixed(rng: random.Random, chars: str, n: int) -> str:
    """Random characters with at least one letter of each case and a digit (real tokens do)."""
    while True:
        value = _r(rng, chars, n)
        if n < 3 or (
            any(c.islower() for c in value)
            and any(c.isupper() for c in value)
            and any(c.isdigit() for c in value)
        ):
            return value


def _b64(rng: random.Random, n_bytes: int) -> str:
    return base64.b64encode(rng.randbytes(n_bytes)).decode()


def _password(rng: random.Random) -> str:
    """A password of one of the shapes people use."""
    words = ["maple", "rocket", "violet", "harbor", "tundra", "pixel", "falcon", "ember"]
    kind = rng.randrange(6)
    if kind == 5:  # a plain word: only masked where the context says it is a password
        return rng.choice(["swordfish", "letmein", "bluebird", "sunshine", "dragonfly"])
    if kind == 0:
        return _mixed(rng, AN + "!#%&*+-=?@^_", rng.randint(12, 20))
    if kind == 1:
        return rng.choice(words).capitalize() + str(rng.randint(10, 9999)) + rng.choice("!#$%&*")
    if kind == 2:
        return "-".join(rng.choice(words) for _ in range(3)) + str(rng.randint(1, 99))
    if kind == 3:
        return _mixed(rng, AN, rng.randint(16, 24))
    return rng.choice(words) + str(rng.randint(100, 99999))


# -- provider formats: (name, env name, value generator) ------------------------------------

Gen = Callable[[random.Random], str]


def _jwt(rng: random.Random) -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    sub = rng.randint(10**8, 10**9)
    body = base64.urlsafe_b64encode(f'{{"sub":"{sub}","iat":1700000000}}'.encode()).decode()
    return f"{head}.{body.rstrip('=')}.{_r(rng, URLSAFE, 43)}"


PROVIDERS: list[tuple[str, str, Gen]] = [
    ("openai_legacy", "OPENAI_API_KEY", lambda r: "sk-" + _mixed(r, AN, 48)),
    ("openai_project", "OPENAI_API_KEY", lambda r: "sk-proj-" + _mixed(r, URLSAFE, 124)),
    ("openai_service", "OPENAI_API_KEY", lambda r: "sk-svcacct-" + _mixed(r, URLSAFE, 100)),
    ("anthropic", "ANTHROPIC_API_KEY", lambda r: "sk-ant-api03-" + _mixed(r, URLSAFE, 93) + "AA"),
    ("anthropic_admin", "ANTHROPIC_ADMIN_KEY", lambda r: "sk-ant-admin01-" + _mixed(r, URLSAFE, 93) + "AA"),
    ("github_classic", "GITHUB_TOKEN", lambda r: "ghp_" + _mixed(r, AN, 36)),
    ("github_oauth", "GH_OAUTH", lambda r: "gho_" + _mixed(r, AN, 36)),
    ("github_app", "GH_APP_TOKEN", lambda r: r.choice(["ghs_", "ghu_"]) + _mixed(r, AN, 36)),
    ("github_refresh", "GH_REFRESH", lambda r: "ghr_" + _mixed(r, AN, 36)),
    ("github_fine_grained", "GH_PAT", lambda r: "github_pat_" + _mixed(r, AN, 22) + "_" + _mixed(r, AN, 59)),
    ("gitlab_pat", "GITLAB_TOKEN", lambda r: "glpat-" + _mixed(r, URLSAFE, 20)),
    ("gitlab_deploy", "CI_DEPLOY_TOKEN", lambda r: "gldt-" + _mixed(r, URLSAFE, 20)),
    ("gitlab_runner", "RUNNER_TOKEN", lambda r: "glrt-" + _mixed(r, URLSAFE, 20)),
    ("slack_bot", "SLACK_BOT_TOKEN", lambda r: f"xoxb-{_r(r, DIGITS, 12)}-{_r(r, DIGITS, 13)}-{_mixed(r, AN, 24)}"),
    ("slack_user", "SLACK_USER_TOKEN", lambda r: f"xoxp-{_r(r, DIGITS, 12)}-{_r(r, DIGITS, 12)}-{_r(r, DIGITS, 13)}-{_r(r, HEX, 32)}"),
    ("slack_app", "SLACK_APP_TOKEN", lambda r: f"xapp-1-A{_r(r, UPNUM, 10)}-{_r(r, DIGITS, 13)}-{_r(r, HEX, 64)}"),
    ("slack_webhook", "SLACK_WEBHOOK_URL", lambda r: f"https://hooks.slack.com/services/T{_r(r, UPNUM, 8)}/B{_r(r, UPNUM, 10)}/{_mixed(r, AN, 24)}"),
    ("stripe_secret", "STRIPE_SECRET_KEY", lambda r: "sk_live_" + _mixed(r, AN, 99)),
    ("stripe_restricted", "STRIPE_RESTRICTED_KEY", lambda r: "rk_live_" + _mixed(r, AN, 99)),
    ("stripe_webhook", "STRIPE_WEBHOOK_SECRET", lambda r: "whsec_" + _mixed(r, AN, 32)),
    ("google_api", "GOOGLE_API_KEY", lambda r: "AIza" + _mixed(r, URLSAFE, 35)),
    ("google_oauth_secret", "GOOGLE_CLIENT_SECRET", lambda r: "GOCSPX-" + _mixed(r, URLSAFE, 28)),
    ("google_access_token", "GOOGLE_ACCESS_TOKEN", lambda r: "ya29." + _mixed(r, URLSAFE, 120)),
    ("aws_access_key_id", "AWS_ACCESS_KEY_ID", lambda r: r.choice(["AKIA", "ASIA"]) + _r(r, UPNUM, 16)),
    ("azure_ad_client_secret", "AZURE_CLIENT_SECRET", lambda r: _r(r, AN, 3) + str(r.randint(0, 9)) + "Q~" + _mixed(r, AN + "_~.-", 34)),
    ("sendgrid", "SENDGRID_API_KEY", lambda r: "SG." + _mixed(r, URLSAFE, 22) + "." + _mixed(r, URLSAFE, 43)),
    ("mailgun", "MAILGUN_API_KEY", lambda r: "key-" + _r(r, HEX, 32)),
    ("mailgun_private", "MAILGUN_KEY", lambda r: f"{_r(r, HEX, 32)}-{_r(r, HEX, 8)}-{_r(r, HEX, 8)}"),
    ("mailchimp", "MAILCHIMP_API_KEY", lambda r: f"{_r(r, HEX, 32)}-us{r.randint(1, 21)}"),
    ("twilio_api_key", "TWILIO_API_KEY", lambda r: "SK" + _r(r, HEX, 32)),
    ("digitalocean_pat", "DIGITALOCEAN_TOKEN", lambda r: "dop_v1_" + _r(r, HEX, 64)),
    ("digitalocean_oauth", "DO_OAUTH", lambda r: "doo_v1_" + _r(r, HEX, 64)),
    ("shopify_access", "SHOPIFY_ACCESS_TOKEN", lambda r: "shpat_" + _r(r, HEX, 32)),
    ("shopify_shared_secret", "SHOPIFY_SECRET", lambda r: "shpss_" + _r(r, HEX, 32)),
    ("databricks", "DATABRICKS_TOKEN", lambda r: "dapi" + _r(r, HEX, 32)),
    ("vault_service", "VAULT_TOKEN", lambda r: "hvs." + _mixed(r, URLSAFE, 91)),
    ("vault_batch", "VAULT_BATCH_TOKEN", lambda r: "hvb." + _mixed(r, URLSAFE, 120)),
    ("square_access", "SQUARE_TOKEN", lambda r: "sq0atp-" + _mixed(r, URLSAFE, 22)),
    ("square_secret", "SQUARE_SECRET", lambda r: "sq0csp-" + _mixed(r, URLSAFE, 43)),
    ("square_production", "SQUARE_ACCESS_TOKEN", lambda r: "EAAA" + _mixed(r, URLSAFE, 60)),
    ("pypi", "TWINE_PASSWORD", lambda r: "pypi-AgEIcHlwaS5vcmc" + _mixed(r, URLSAFE, 150)),
    ("discord_bot", "DISCORD_TOKEN", lambda r: r.choice("MN") + _mixed(r, AN, 23) + "." + _mixed(r, URLSAFE, 6) + "." + _mixed(r, URLSAFE, 27)),
    ("discord_webhook", "DISCORD_WEBHOOK", lambda r: f"https://discord.com/api/webhooks/{_r(r, DIGITS, 18)}/{_mixed(r, URLSAFE, 68)}"),
    ("telegram_bot", "TELEGRAM_BOT_TOKEN", lambda r: f"{r.randint(10**8, 10**10)}:AA{_mixed(r, URLSAFE, 33)}"),
    ("alibaba_access_key_id", "ALIBABA_CLOUD_ACCESS_KEY_ID", lambda r: "LTAI" + _mixed(r, AN, 20)),
    ("tencent_secret_id", "TENCENTCLOUD_SECRET_ID", lambda r: "AKID" + _mixed(r, AN, 32)),
    ("huggingface", "HF_TOKEN", lambda r: "hf_" + _mixed(r, AN, 34)),
    ("npm", "NPM_TOKEN", lambda r: "npm_" + _mixed(r, AN, 36)),
    ("jwt", "SESSION_JWT", _jwt),
    ("age_secret_key", "SOPS_AGE_KEY", lambda r: "AGE-SECRET-KEY-1" + _r(r, BECH32, 58)),
    ("atlassian", "JIRA_API_TOKEN", lambda r: "ATATT3xFfGF0" + _mixed(r, URLSAFE, 180) + "=" + _r(r, HEX.upper(), 8)),
    ("linear", "LINEAR_API_KEY", lambda r: "lin_api_" + _mixed(r, AN, 40)),
    ("notion", "NOTION_TOKEN", lambda r: "ntn_" + _r(r, DIGITS, 11) + _mixed(r, AN, 35)),
    ("figma", "FIGMA_TOKEN", lambda r: "figd_" + _mixed(r, URLSAFE, 40)),
    ("postman", "POSTMAN_API_KEY", lambda r: f"PMAK-{_r(r, HEX, 24)}-{_r(r, HEX, 34)}"),
    ("doppler", "DOPPLER_TOKEN", lambda r: "dp.pt." + _mixed(r, AN, 43)),
    ("grafana_cloud", "GRAFANA_CLOUD_TOKEN", lambda r: "glc_" + _mixed(r, AN, 80) + "=="),
    ("grafana_service_account", "GRAFANA_SA_TOKEN", lambda r: "glsa_" + _mixed(r, AN, 32) + "_" + _r(r, HEX, 8)),
    ("sentry_user", "SENTRY_AUTH_TOKEN", lambda r: "sntryu_" + _r(r, HEX, 64)),
    ("new_relic", "NEW_RELIC_API_KEY", lambda r: "NRAK-" + _r(r, UPNUM, 27)),
    ("docker_hub", "DOCKERHUB_TOKEN", lambda r: "dckr_pat_" + _mixed(r, URLSAFE, 27)),
    ("groq", "GROQ_API_KEY", lambda r: "gsk_" + _mixed(r, AN, 52)),
    ("replicate", "REPLICATE_API_TOKEN", lambda r: "r8_" + _mixed(r, AN, 37)),
    ("perplexity", "PPLX_API_KEY", lambda r: "pplx-" + _mixed(r, AN, 48)),
    ("supabase", "SUPABASE_ACCESS_TOKEN", lambda r: "sbp_" + _r(r, HEX, 40)),
    ("planetscale", "PLANETSCALE_TOKEN", lambda r: "pscale_tkn_" + _mixed(r, URLSAFE, 43)),
    ("rubygems", "GEM_HOST_API_KEY", lambda r: "rubygems_" + _r(r, HEX, 48)),
    ("artifactory", "ARTIFACTORY_API_KEY", lambda r: "AKCp" + _mixed(r, AN, 69)),
    ("dynatrace", "DT_API_TOKEN", lambda r: f"dt0c01.{_r(r, UPNUM, 24)}.{_r(r, UPNUM, 64)}"),
    ("terraform_cloud", "TFE_TOKEN", lambda r: f"{_r(r, LOWER + DIGITS, 14)}.atlasv1.{_mixed(r, URLSAFE, 67)}"),
    ("heroku", "HEROKU_API_KEY", lambda r: "HRKU-AA" + _mixed(r, URLSAFE, 58)),
    ("firebase_fcm", "FCM_SERVER_KEY", lambda r: "AAAA" + _mixed(r, URLSAFE, 7) + ":APA91b" + _mixed(r, URLSAFE, 134)),
    ("facebook", "FB_ACCESS_TOKEN", lambda r: "EAAB" + _mixed(r, AN, 150)),
    ("mapbox_secret", "MAPBOX_SECRET_TOKEN", lambda r: "sk.eyJ1Ijoi" + _mixed(r, URLSAFE, 50) + "." + _mixed(r, URLSAFE, 22)),
    ("langsmith", "LANGSMITH_API_KEY", lambda r: f"lsv2_pt_{_r(r, HEX, 32)}_{_r(r, HEX, 10)}"),
    ("bitbucket_app_password", "BITBUCKET_APP_PASSWORD", lambda r: "ATBB" + _mixed(r, AN, 32)),
    ("xai", "XAI_API_KEY", lambda r: "xai-" + _mixed(r, AN, 80)),
]  # fmt: skip

# Where a provider token is pasted. ``{v}`` is the value, ``{env}`` its variable name.
CARRIERS = [
    "export {env}={v}",
    '{{"{key}": "{v}"}}',
    "my key is {v} ok",
    "{env}={v}",
    "curl -H 'Authorization: Bearer {v}' https://api.example.com/v1/me",
    "  {key}: {v}",
    "use {v} for the staging deploy",
    "这是我的密钥 {v}，请保存好",
    "Here is the token: {v} (expires Friday)",
    '{key} = "{v}"',
    "キーは {v} です",
    "{v}",
    "- set the {key} to {v} before running the job",
    "docker run -e {env}={v} app:latest",
]


def _provider_items(rng: random.Random, carriers: list[str]) -> list[Item]:
    items = []
    for name, env, gen in PROVIDERS:
        for carrier in rng.sample(carriers, 3):
            value = gen(rng)
            text = carrier.format(v=value, env=env, key=env.lower())
            items.append(Item(name, text, (value,)))
    return items


# -- credentials known by their context ------------------------------------------------------


def _aws_pair(rng: random.Random, i: int) -> Item:
    key_id = "AKIA" + _r(rng, UPNUM, 16)
    secret = _mixed(rng, B64, 40)
    forms = [
        f"{key_id} {secret}",
        f"Access key ID,Secret access key\n{key_id},{secret}",
        f"aws keys: {key_id} / {secret}",
        f"id={key_id}\nsecret={secret}",
    ]
    return Item("aws_secret_next_to_key_id", forms[i % len(forms)], (key_id, secret))


def _context_items(rng: random.Random, half: int) -> list[Item]:
    out: list[Item] = []

    def add(fmt: str, forms: list[Callable[[str], str]], make: Gen = _password) -> None:
        mine = forms[half::2] or forms
        for j in range(3):
            value = make(rng)
            out.append(Item(fmt, mine[j % len(mine)](value), (value,)))

    user = lambda: rng.choice(["app", "deploy", "svc_reports", "admin", "ci"])  # noqa: E731
    host = lambda: rng.choice(["db.internal", "10.0.3.7", "pg.prod.example.com"])  # noqa: E731
    add(
        "postgres_url",
        [
            lambda v: f"DATABASE_URL=postgres://{user()}:{v}@{host()}:5432/app",
            lambda v: f"connect with postgresql://{user()}:{v}@{host()}/orders",
        ],
    )
    add(
        "mongodb_url",
        [
            lambda v: f"mongodb+srv://{user()}:{v}@cluster0.ab1cd.mongodb.net/test",
            lambda v: f'MONGO_URI="mongodb://{user()}:{v}@{host()}:27017"',
        ],
    )
    add(
        "redis_url_no_user",
        [
            lambda v: f"REDIS_URL=redis://:{v}@cache:6379/0",
            lambda v: f"the cache is at rediss://:{v}@redis.example.com:6380",
        ],
    )
    add(
        "amqp_url",
        [
            lambda v: f"BROKER_URL=amqp://{user()}:{v}@rabbit:5672//",
            lambda v: f"celery -b amqp://{user()}:{v}@mq.internal worker",
        ],
    )
    add(
        "https_userinfo",
        [
            lambda v: f"git clone https://{user()}:{v}@git.example.com/org/repo.git",
            lambda v: f"pip install --index-url https://{user()}:{v}@pypi.example.com/simple pkg",
        ],
    )
    add(
        "bearer_header",
        [
            lambda v: f"Authorization: Bearer {v}",
            lambda v: f'curl -H "Authorization: Bearer {v}" https://api.example.com',
        ],
        lambda r: _mixed(r, AN + "._-", 40),
    )
    add(
        "basic_auth_header",
        [lambda v: f"Authorization: Basic {v}", lambda v: f"-H 'authorization: basic {v}'"],
        lambda r: base64.b64encode(f"{user()}:{_password(r)}".encode()).decode(),
    )
    add(
        "env_password",
        [
            lambda v: f"DB_PASSWORD={v}",
            lambda v: f"export POSTGRES_PASSWORD={v}",
            lambda v: f"MYSQL_ROOT_PASSWORD={v}",
            lambda v: f"SMTP_PASS={v}",
        ],
    )
    add(
        "yaml_password",
        [
            lambda v: f"  password: {v}",
            lambda v: f"password: '{v}'",
            lambda v: f'    db_password: "{v}"',
            lambda v: f"admin_password: {v}",
        ],
    )
    add(
        "json_secret",
        [lambda v: f'{{"client_secret": "{v}"}}', lambda v: f'"apiKey": "{v}",'],
        lambda r: _mixed(r, AN, 32),
    )
    add(
        "mysql_p",
        [
            lambda v: f"mysql -u root -p{v} orders",
            lambda v: f"mysqldump -uadmin -p{v} --all-databases > dump.sql",
        ],
    )
    add(
        "password_flag",
        [
            lambda v: f"psql --username app --password {v}",
            lambda v: f"./deploy.sh --password {v} --env prod",
            lambda v: f"mytool login --user bob --password={v}",
            lambda v: f"vault login -method=userpass username=bob password={v}",
        ],
    )
    add(
        "password_in_prose",
        [
            lambda v: f"the root password is {v}",
            lambda v: f"The password for the staging box is {v}.",
            lambda v: f"fyi admin password was changed to {v}",
            lambda v: f"wifi password is {v}",
        ],
    )
    add(
        "netrc_line",
        [
            lambda v: f"machine api.example.com login bob password {v}",
            lambda v: f"machine github.com login x-access-token password {v}",
        ],
    )
    add(
        "netrc_block",
        [
            lambda v: f"machine ftp.example.com\n  login alice\n  password {v}",
            lambda v: f"machine registry.example.com\nlogin ci\npassword {v}\n",
        ],
    )
    add(
        "cookie_header",
        [
            lambda v: f"Cookie: sessionid={v}; csrftoken=abc",
            lambda v: f"cookie: theme=dark; session={v}",
            lambda v: f"Set-Cookie: sid={v}; Path=/; HttpOnly; Secure",
        ],
        lambda r: _mixed(r, AN, 32),
    )
    add(
        "azure_account_key",
        [
            lambda v: (
                f"DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey={v};EndpointSuffix=core.windows.net"
            ),
            lambda v: f'AZURE_STORAGE_CONNECTION_STRING="AccountName=logs;AccountKey={v}"',
        ],
        lambda r: _b64(r, 64),
    )
    add(
        "azure_shared_access_key",
        [
            lambda v: (
                f"Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={v}"
            ),
            lambda v: (
                f"HostName=hub.azure-devices.net;SharedAccessKeyName=iothubowner;SharedAccessKey={v}"
            ),
        ],
        lambda r: _b64(r, 32),
    )
    add(
        "azure_sas_sig",
        [
            lambda v: (
                f"https://acct.blob.core.windows.net/c/report.pdf?sv=2022-11-02&sr=b&sp=r&se=2026-12-01T00:00:00Z&sig={v}"
            ),
            lambda v: (
                f"SAS: sp=racwdl&st=2026-01-01&se=2026-02-01&spr=https&sv=2022-11-02&sr=c&sig={v}"
            ),
        ],
        lambda r: _b64(r, 32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D"),
    )
    add(
        "aws_secret_assignment",
        [lambda v: f"aws_secret_access_key = {v}", lambda v: f"AWS_SECRET_ACCESS_KEY={v}"],
        lambda r: _mixed(r, B64, 40),
    )
    add(
        "aws_session_token",
        [lambda v: f"aws_session_token = {v}", lambda v: f"export AWS_SESSION_TOKEN={v}"],
        lambda r: "IQoJb3JpZ2luX2Vj" + _b64(r, 300),
    )
    add(
        "alibaba_secret",
        [lambda v: f"AccessKeySecret: {v}", lambda v: f"ALIBABA_CLOUD_ACCESS_KEY_SECRET={v}"],
        lambda r: _mixed(r, AN, 30),
    )
    add(
        "tencent_secret",
        [lambda v: f"SecretKey={v}", lambda v: f"TENCENTCLOUD_SECRET_KEY={v}"],
        lambda r: _mixed(r, AN, 32),
    )
    add(
        "twilio_auth_token",
        [lambda v: f"TWILIO_AUTH_TOKEN={v}", lambda v: f"twilio auth token: {v}"],
        lambda r: _r(r, HEX, 32),
    )
    add(
        "cjk_password_zh",
        [
            lambda v: f"密码：{v}",
            lambda v: f"数据库密码是 {v}，别外传",
            lambda v: f"服务器的登录密码为{v}",
            lambda v: f"root 密码: {v}",
        ],
    )
    add("cjk_kouling", [lambda v: f"口令：{v}", lambda v: f"管理口令 {v}"])
    add(
        "cjk_lingpai",
        [lambda v: f"令牌：{v}", lambda v: f"访问令牌是 {v}"],
        lambda r: _mixed(r, AN, 32),
    )
    add(
        "fullwidth_colon_token",
        [lambda v: f"token：{v}", lambda v: f"API key：{v}"],
        lambda r: _mixed(r, AN, 32),
    )
    add("cjk_password_ja", [lambda v: f"パスワード：{v}", lambda v: f"パスワードは {v} です"])
    add("cjk_password_ko", [lambda v: f"비밀번호: {v}", lambda v: f"비밀번호는 {v} 입니다"])
    add(
        "curl_user",
        [
            lambda v: f"curl -u admin:{v} https://jenkins.example.com/api/json",
            lambda v: f"curl --user deploy:{v} -X POST https://ci.example.com/job",
        ],
    )
    add(
        "sshpass",
        [
            lambda v: f"sshpass -p {v} ssh root@10.0.0.5",
            lambda v: f"sshpass -p '{v}' scp a.tar host:/tmp",
        ],
    )
    add(
        "pgpassword",
        [
            lambda v: f"PGPASSWORD={v} psql -h db -U app",
            lambda v: f"env PGPASSWORD={v} pg_dump app",
        ],
    )
    add(
        "redis_cli_a",
        [
            lambda v: f"redis-cli -h cache -a {v} ping",
            lambda v: f"redis-cli -a {v} --no-auth-warning info",
        ],
    )
    add(
        "token_flag",
        [
            lambda v: f"gh auth login --with-token {v}",
            lambda v: f"./cli --api-key {v} sync",
            lambda v: f"tool --token={v} push",
            lambda v: f"runner register --token {v}",
        ],
        lambda r: _mixed(r, AN, 36),
    )
    add(
        "api_key_header",
        [
            lambda v: f"X-API-Key: {v}",
            lambda v: f"curl -H 'x-api-key: {v}' https://api.example.com",
        ],
        lambda r: _mixed(r, AN, 32),
    )
    add(
        "django_secret_key",
        [lambda v: f"SECRET_KEY = '{v}'", lambda v: f"SECRET_KEY={v}"],
        lambda r: _mixed(r, AN + "!@#%^&*(-_=+)", 50),
    )
    add(
        "docker_auth",
        [
            lambda v: f'{{"auths": {{"registry.example.com": {{"auth": "{v}"}}}}}}',
            lambda v: f'      "auth": "{v}"',
        ],
        lambda r: base64.b64encode(f"ci:{_password(r)}".encode()).decode(),
    )
    add(
        "kubeconfig_token",
        [lambda v: f"    token: {v}", lambda v: f"  user:\n    token: {v}"],
        lambda r: _mixed(r, URLSAFE, 40),
    )
    for i in range(3):
        out.append(_aws_pair(rng, 2 * i + half))
    return out


def _private_key_items(rng: random.Random) -> list[Item]:
    out = []
    for kind in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY",
                 "PGP PRIVATE KEY BLOCK"):  # fmt: skip
        body = "\n".join(_b64(rng, 48) for _ in range(6))
        block = f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"
        out.append(Item("private_key", f"key:\n{block}\nthanks", (body,)))
    body = "\\n".join(_b64(rng, 48) for _ in range(4))
    json_key = (
        f'"private_key": "-----BEGIN PRIVATE KEY-----\\n{body}\\n-----END PRIVATE KEY-----\\n",'
    )
    out.append(Item("gcp_service_account_key", json_key, (body,)))
    return out


def secret_items(split: str) -> list[Item]:
    """Every labelled secret of one half of the corpus."""
    half = SPLITS.index(split)
    rng = random.Random(1 + half)
    carriers = CARRIERS[half::2]
    return [*_provider_items(rng, carriers), *_context_items(rng, half), *_private_key_items(rng)]


# -- benign lines ----------------------------------------------------------------------------

NAMES = ["alice", "bob", "dana", "wei", "yuki", "minji", "omar", "lena"]
WORDS = ["deploy", "queue", "worker", "retry", "cache", "schema", "index", "latency", "review"]


def _uuid(rng: random.Random) -> str:
    h = _r(rng, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


DATA: list[Callable[[random.Random], str]] = [
    lambda r: f"commit {_r(r, HEX, 40)}",
    lambda r: f"{_r(r, HEX, 7)} fix: handle empty {r.choice(WORDS)} ({_r(r, HEX, 7)})",
    lambda r: f"request_id={_uuid(r)} status=200 took={r.randint(1, 900)}ms",
    lambda r: f"sha256:{_r(r, HEX, 64)}",
    lambda r: f"image: ghcr.io/acme/api@sha256:{_r(r, HEX, 64)}",
    lambda r: f"{_r(r, HEX, 32)}  backup-{r.randint(1, 99)}.tar.gz",
    lambda r: f"integrity sha512-{_b64(r, 64)}",
    lambda r: f"data:image/png;base64,{_b64(r, 60)}",
    lambda r: f"{_b64(r, 30)}",
    lambda r: f"https://example.com/search?q={r.choice(WORDS)}&page={r.randint(1, 9)}",
    lambda r: f"https://cdn.example.com/assets/app.{_r(r, HEX, 8)}.js",
    lambda r: f"trace_id={_r(r, HEX, 32)} span_id={_r(r, HEX, 16)}",
    lambda r: (
        f"2026-11-{r.randint(1, 30):02d}T09:{r.randint(0, 59):02d}:00Z INFO worker={r.randint(1, 9)} path=/api/v1/items/{r.randint(1, 999)}"
    ),
    lambda r: (
        f'{r.randint(1, 255)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)} - - [30/Nov/2026] "GET /health HTTP/1.1" 200'
    ),
    lambda r: f"requests==2.{r.randint(20, 32)}.{r.randint(0, 9)} --hash=sha256:{_r(r, HEX, 64)}",
    lambda r: f'etag: "{_r(r, HEX, 32)}"',
    lambda r: f"uuid {_uuid(r)}",
    lambda r: f"md5({r.choice(WORDS)}.csv) = {_r(r, HEX, 32)}",
    lambda r: f"https://github.com/acme/{r.choice(WORDS)}/commit/{_r(r, HEX, 40)}",
    lambda r: f"s3://acme-backups/{r.randint(2020, 2026)}/{_uuid(r)}.parquet",
    lambda r: f"object key: uploads/{_r(r, HEX, 24)}/{r.choice(WORDS)}.png",
    lambda r: f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{_r(r, B64, 43)} {r.choice(NAMES)}@laptop",
    lambda r: f"Fingerprint: SHA256:{_r(r, B64, 43)}",
    lambda r: f"video id {_r(r, URLSAFE, 11)}, playlist PL{_r(r, URLSAFE, 32)}",
    lambda r: f"ETH tx 0x{_r(r, HEX, 64)}",
    lambda r: (
        f"order #{r.randint(10000, 99999)} total {r.randint(1, 999)}.{r.randint(0, 99):02d} EUR"
    ),
    lambda r: (
        f"pod/{r.choice(WORDS)}-{_r(r, LOWER + DIGITS, 10)}-{_r(r, LOWER + DIGITS, 5)} Running"
    ),
    lambda r: (
        f"pip install sk-{r.choice(['video', 'learn-extra', 'image-tools'])}-{r.randint(1, 9)}.{r.randint(0, 9)}"
    ),
    lambda r: f"color: #{_r(r, HEX, 6)}; background: #{_r(r, HEX, 6)}",
    lambda r: (
        f"AKIA is the prefix of long-term AWS access key ids; build {_r(r, UPNUM, 20)} passed"
    ),
]

KEYWORD_LINES: list[Callable[[random.Random], str]] = [
    lambda r: "Reset password: click the link in the email we sent you.",
    lambda r: f"token = tokenizer.encode(text)[:{r.randint(64, 4096)}]",
    lambda r: f"PWD=/home/{r.choice(NAMES)}",
    lambda r: f"OLDPWD=/home/{r.choice(NAMES)}/src",
    lambda r: f"xoxo-{r.choice(['gossip', 'hugs', 'see-you-soon'])}",
    lambda r: f"The token expires after {r.randint(5, 60)} minutes.",
    lambda r: f"Use a password manager; {r.choice(NAMES)} recommends 1Password.",
    lambda r: "Tokenization splits text into tokens before the model sees it.",
    lambda r: "the secret to good tea is patience",
    lambda r: "Your API key is shown only once, so copy it now.",
    lambda r: "密码错误，请重试。",
    lambda r: "请输入密码后继续。",
    lambda r: "令牌已过期，请重新登录。",
    lambda r: "パスワードを忘れた場合は管理者に連絡してください。",
    lambda r: "비밀번호를 입력하세요.",
    lambda r: f"token: {r.randint(100, 8000)} used of 8192",
    lambda r: "password: (hidden)",
    lambda r: "the password is stored in the team vault",
    lambda r: "password: ********",
    lambda r: "api_key: ${API_KEY}",
    lambda r: 'password = os.environ["DB_PASSWORD"]',
    lambda r: f"max_tokens={r.randint(100, 8000)} temperature=0.{r.randint(0, 9)}",
    lambda r: "tokens = text.split()",
    lambda r: "def check_password(password: str) -> bool:",
    lambda r: "    if token is None:",
    lambda r: "auth: required",
    lambda r: "AUTH_METHOD=oauth",
    lambda r: "token_type: bearer",
    lambda r: "Bearer tokens are sent in the Authorization header.",
    lambda r: 'curl -H "Authorization: Bearer $TOKEN" https://api.example.com',
    lambda r: f"PASSWORD_MIN_LENGTH={r.randint(8, 16)}",
    lambda r: "export GITHUB_TOKEN=$(gh auth token)",
    lambda r: "      token: ${{ secrets.GITHUB_TOKEN }}",
    lambda r: "echo $PASS | docker login --username bob --password-stdin",
    lambda r: "mysql -u root -p",
    lambda r: "git config --global credential.helper store",
    lambda r: "The secret is out: we ship on Monday.",
    lambda r: "the token is invalid",
    lambda r: f"Your password must be at least {r.randint(8, 16)} characters long.",
    lambda r: "token = next(tokens)",
    lambda r: "access_token = response.json()['access_token']",
    lambda r: "password = None",
    lambda r: "    password: str = Field(..., min_length=12)",
    lambda r: "api_key: Optional[str] = None",
    lambda r: "SECRET_KEY = env('SECRET_KEY')",
    lambda r: "    secret = secrets.token_hex(16)",
    lambda r: "self.password_hash = bcrypt.hash(password)",
    lambda r: "for token in tokens:",
    lambda r: "请在设置里修改密码。",
    lambda r: f"密码长度至少 {r.randint(8, 16)} 位。",
    lambda r: f"令牌有效期为 {r.randint(5, 60)} 分钟。",
    lambda r: "我忘了我的密码了，怎么办？",
    lambda r: "口令错误次数过多，账号已锁定。",
    lambda r: "密码：请通过邮件重置",
    lambda r: "token：已过期",
    lambda r: "パスワード：未設定",
    lambda r: "비밀번호: 설정 안 됨",
    lambda r: "LOG_LEVEL=info",
    lambda r: f"TOKEN_TTL={r.randint(60, 86400)}",
    lambda r: "JWT_ALGORITHM=HS256",
    lambda r: "API_KEY_HEADER=X-Api-Key",
    lambda r: "TOKEN_URL=https://auth.example.com/oauth/token",
    lambda r: "AUTH_ENABLED=true",
    lambda r: "PASSWORD_HASHERS=argon2",
    lambda r: "tokens = tokenizer(text, return_tensors='pt')",
    lambda r: "if password != confirm_password:",
    lambda r: "secretKeyRef:\n  name: db-credentials\n  key: password",
    lambda r: f"{r.choice(NAMES)} changed her password yesterday.",
    lambda r: "The access token is refreshed by the client library.",
    lambda r: "password: <your password>",
    lambda r: "api_key=YOUR_API_KEY",
    lambda r: "token: string",
    lambda r: "    password: changeme  # replace before deploying",
    lambda r: "DB_PASSWORD=",
    lambda r: "token = Token(kind=NAME, value=word)",
    lambda r: "the API key: see the onboarding doc",
    lambda r: "Secret Santa: everyone brings a gift under 20 EUR",
    lambda r: "password reset emails are sent by the auth service",
    lambda r: f"{r.choice(NAMES)}: what's the wifi password?",
    lambda r: "token budget: 4000",
    lambda r: "the password is correct, but the account is locked",
    lambda r: "set the password to something long",
    lambda r: "GITHUB_TOKEN: ${{ github.token }}",
    lambda r: "password=$(pass show prod/db)",
    lambda r: "PASSWORD_FILE=/run/secrets/db_password",
    lambda r: "secret: prod/db/password",
    lambda r: "auth_token = request.headers.get('X-Auth-Token')",
    lambda r: "--token $CI_JOB_TOKEN",
    lambda r: "Cookie: theme=dark; lang=en",
    lambda r: "machine example.com login bob",
    lambda r: "https://user@example.com/path",
    lambda r: "sig=2 of the approvals is still missing",
    lambda r: "API 密钥：在控制台的“访问管理”里创建",
    lambda r: "private_key_path: ~/.ssh/id_ed25519",
    lambda r: "credentials: default",
    lambda r: f"Token count: {r.randint(10, 999)}",
    lambda r: "the key id AKIA… belongs to the ci user (rotated last week)",
]


# How a line reaches memory: as it is, as a ledger bullet, quoted in chat, in a log.
WRAPPERS = [
    "{line}",
    "- 09:41 {line}",
    "> {line}",
    "{name}: {line}",
    "    {line}",
    "[tool output] {line}",
]


def benign_items(split: str, n_data: int = 1_200, n_keyword: int = 1_200) -> list[Item]:
    """Benign lines of one half: plain data, then lines that use secret-like words."""
    half = SPLITS.index(split)
    rng = random.Random(101 + half)
    data = DATA[half::2]
    words = KEYWORD_LINES[half::2]
    out = [Item("plain_data", data[i % len(data)](rng)) for i in range(n_data)]
    wrappers = WRAPPERS[half::2]
    for i in range(n_keyword):
        line = words[i % len(words)](rng)
        wrap = wrappers[(i // len(words)) % len(wrappers)]
        out.append(Item("keyword_text", wrap.format(line=line, name=rng.choice(NAMES))))
    return out


def corpus(split: str) -> tuple[list[Item], list[Item]]:
    """``(secrets, benign)`` of one half."""
    return secret_items(split), benign_items(split)
