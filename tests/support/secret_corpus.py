"""Secret shapes in each provider's real format, with fake values: the line each would appear in (a log, a config,
a chat message) and the parts that must never survive redaction.

Values are assembled from pieces at import time, so this file holds no complete token that a push-protection
scanner would flag; none of them was ever issued by anyone.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    name: str
    line: str
    secrets: tuple[str, ...]


def _r(alphabet: str, n: int, seed: int = 7) -> str:
    """n varied characters of `alphabet`, deterministic (a run of one letter is allowlisted by gitleaks)."""
    return "".join(alphabet[(i * 7 + seed * 13 + i * i) % len(alphabet)] for i in range(n))


AN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
LOW = "abcdefghijklmnopqrstuvwxyz0123456789"
HEX = "0123456789abcdef"
B64 = AN + "+/"
UP = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

GH = _r(AN, 36, 1)
FGPAT = "github" + "_pat_" + "11" + _r(UP, 20, 2) + "_" + _r(AN, 59, 3)
GLPAT = "gl" + "pat-" + _r(AN, 20, 4)
SLACK_WEBHOOK = ("https://hooks.slack.com/services/" + "T" + _r(UP, 8, 5) + "/B" + _r(UP, 10, 6) + "/"
                 + _r(AN, 24, 7))
AWS_ID = "AK" + "IA" + _r(UP, 16, 8)
AWS_SECRET = _r(AN, 18, 9) + "/" + _r(AN, 10, 10) + "+" + _r(AN, 10, 11)
PEM_BODY = _r(B64, 64, 12)
PEM_BODY2 = _r(B64, 48, 13)


def _pem(kind: str) -> str:
    head = f"-----BEGIN {kind}-----"
    return f"{head}\n{PEM_BODY}\n{PEM_BODY2}\n-----END {kind}-----"


GCP_KEY_ID = _r(HEX, 40, 14)
GCP_JSON = json.dumps({"type": "service_account", "project_id": "specops-test", "private_key_id": GCP_KEY_ID,
                       "private_key": _pem("PRIVATE KEY") + "\n",
                       "client_email": "svc@specops-test.iam.gserviceaccount.com"})
AZ_KEY = _r(B64, 86, 15) + "=="
AZ_SIG = _r(AN, 43, 16) + "%3D"
DOCKER_AUTH = base64.b64encode(b"specops:" + _r(AN, 24, 17).encode()).decode()
JWT = ("ey" + "J" + base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")[3:] + "."
       + base64.urlsafe_b64encode(b'{"sub":"1234567890","name":"specops"}').decode().rstrip("=") + "."
       + _r(AN + "-_", 43, 18))
PYPI = "pypi-" + "AgEIcHlwaS5vcmc" + _r(AN + "-_", 70, 19)

SHAPES: tuple[Shape, ...] = (
    Shape("github-classic-ghp", f"git clone https://x:{'gh' + 'p_' + GH}@127.0.0.1/r.git",
          ("gh" + "p_" + GH,)),
    Shape("github-oauth-gho", f"GITHUB_TOKEN={'gh' + 'o_' + GH}", ("gh" + "o_" + GH,)),
    Shape("github-user-ghu", f"using token {'gh' + 'u_' + GH} for the app", ("gh" + "u_" + GH,)),
    Shape("github-server-ghs", f"installation token {'gh' + 's_' + GH} expires soon", ("gh" + "s_" + GH,)),
    Shape("github-refresh-ghr", f"refresh={'gh' + 'r_' + GH}", ("gh" + "r_" + GH,)),
    Shape("github-fine-grained", f"ERROR push failed with {FGPAT}: 403", (FGPAT,)),
    Shape("gitlab-pat", f"export CI_TOKEN {GLPAT}", (GLPAT,)),
    Shape("slack-bot", f"posting as {'xo' + 'xb-' + '1234567890-' + '0987654321-' + _r(AN, 24, 20)}",
          ("xo" + "xb-" + "1234567890-" + "0987654321-" + _r(AN, 24, 20),)),
    Shape("slack-user", f"user token {'xo' + 'xp-' + '1234567890-' + '1234567890-' + '1234567890-' + _r(HEX, 32, 21)}",
          ("xo" + "xp-" + "1234567890-" + "1234567890-" + "1234567890-" + _r(HEX, 32, 21),)),
    Shape("slack-xoxa", f"legacy {'xo' + 'xa-2-' + _r(AN, 30, 22)}", ("xo" + "xa-2-" + _r(AN, 30, 22),)),
    Shape("slack-xoxc", f"browser token {'xo' + 'xc-' + '1234567890-' + _r(AN, 40, 23)}",
          ("xo" + "xc-" + "1234567890-" + _r(AN, 40, 23),)),
    Shape("slack-xoxd", f"cookie d={'xo' + 'xd-' + _r(AN + '%', 60, 24)}", ("xo" + "xd-" + _r(AN + "%", 60, 24),)),
    Shape("slack-app", f"SLACK_APP_TOKEN {'xa' + 'pp-1-A0' + _r(UP, 9, 25) + '-' + '1234567890123-' + _r(HEX, 64, 26)}",
          ("xa" + "pp-1-A0" + _r(UP, 9, 25) + "-" + "1234567890123-" + _r(HEX, 64, 26),)),
    Shape("slack-webhook", f"WARNING posting to {SLACK_WEBHOOK} failed", (SLACK_WEBHOOK.split("services/")[1],)),
    Shape("slack-client-secret", f"SLACK_CLIENT_SECRET={_r(HEX, 32, 27)}", (_r(HEX, 32, 27),)),
    Shape("slack-signing-secret", f"signing_secret: {_r(HEX, 32, 28)}", (_r(HEX, 32, 28),)),
    Shape("aws-pair", f"INFO using {AWS_ID} {AWS_SECRET}", (AWS_ID, AWS_SECRET)),
    Shape("aws-env", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", (AWS_SECRET,)),
    Shape("gcp-service-account", f"loaded credentials {GCP_JSON}", (GCP_KEY_ID, PEM_BODY, PEM_BODY2)),
    Shape("gcp-api-key", f"maps key {'AI' + 'za' + 'Sy' + _r(AN + '-_', 33, 29)}",
          ("AI" + "za" + "Sy" + _r(AN + "-_", 33, 29),)),
    Shape("azure-connection-string", "DefaultEndpointsProtocol=https;AccountName=specops;"
          f"AccountKey={AZ_KEY};EndpointSuffix=core.windows.net", (AZ_KEY,)),
    Shape("azure-sas", f"GET https://specops.blob.core.windows.net/c/x?sv=2022-11-02&ss=b&sp=r&sig={AZ_SIG} 200",
          (AZ_SIG,)),
    Shape("azure-shared-access-signature", f"SharedAccessSignature=sv=2022-11-02&sig={AZ_SIG};", (AZ_SIG,)),
    Shape("huggingface", f"HF_TOKEN={'hf' + '_' + _r(AN, 34, 30)}", ("hf" + "_" + _r(AN, 34, 30),)),
    Shape("openai-project", f"OPENAI_API_KEY={'sk' + '-proj-' + _r(AN + '-_', 120, 31)}",
          ("sk" + "-proj-" + _r(AN + "-_", 120, 31),)),
    Shape("openai-legacy", f"openai key {'sk' + '-' + _r(AN, 20, 32) + 'T3Blbk' + 'FJ' + _r(AN, 20, 33)}",
          ("sk" + "-" + _r(AN, 20, 32) + "T3Blbk" + "FJ" + _r(AN, 20, 33),)),
    Shape("anthropic", f"x-api-key: {'sk' + '-ant-api03-' + _r(AN + '-_', 93, 34) + 'AA'}",
          ("sk" + "-ant-api03-" + _r(AN + "-_", 93, 34) + "AA",)),
    Shape("stripe-secret", f"stripe {'sk' + '_live_' + _r(AN, 24, 35)}", ("sk" + "_live_" + _r(AN, 24, 35),)),
    Shape("stripe-restricted", f"stripe {'rk' + '_live_' + _r(AN, 24, 36)}", ("rk" + "_live_" + _r(AN, 24, 36),)),
    Shape("npm", f"//registry.npmjs.org/:_authToken={'np' + 'm_' + _r(AN, 36, 37)}", ("np" + "m_" + _r(AN, 36, 37),)),
    Shape("pypi", f"password = {PYPI}", (PYPI,)),
    Shape("pypi-bare", f"twine upload with {PYPI}", (PYPI,)),
    Shape("docker-auth", json.dumps({"auths": {"127.0.0.1:5000": {"auth": DOCKER_AUTH}}}), (DOCKER_AUTH,)),
    Shape("jwt", f"cookie session={JWT}; path=/", (JWT.split(".")[2], JWT)),
    Shape("pem-rsa", _pem("RSA PRIVATE KEY"), (PEM_BODY, PEM_BODY2)),
    Shape("pem-ec", _pem("EC PRIVATE KEY"), (PEM_BODY, PEM_BODY2)),
    Shape("pem-openssh", _pem("OPENSSH PRIVATE KEY"), (PEM_BODY, PEM_BODY2)),
    Shape("pgp-private", _pem("PGP PRIVATE KEY BLOCK"), (PEM_BODY, PEM_BODY2)),
    Shape("url-password-slash", "GET https://bob:pa/ss99word@127.0.0.1/x failed", ("pa/ss99word", "ss99word")),
    Shape("url-password-at", "proxy http://alice:hunter@2@127.0.0.1:3128/", ("hunter@2",)),
    Shape("url-password-percent", "fetch https://carol:s3cr%40t%2Fpw@127.0.0.1/", ("s3cr%40t%2Fpw",)),
    Shape("dsn-postgres", "could not connect to postgres://admin:p@ss@word99@db:5432/app", ("p@ss@word99", "word99")),
    Shape("dsn-mysql", "DATABASE_URL mysql://root:My5ql!Pass@127.0.0.1:3306/db", ("My5ql!Pass",)),
    Shape("dsn-redis", "broker redis://:R3d1sPassw0rd@127.0.0.1:6379/0", ("R3d1sPassw0rd",)),
    Shape("dsn-mongodb-srv", "mongodb+srv://svc:M0ng0/Pw@d@cluster0.example.mongodb.net/app", ("M0ng0/Pw@d",)),
    Shape("dsn-amqp", "amqp://guest:Rabb1tPw99@127.0.0.1:5672/vhost", ("Rabb1tPw99",)),
    Shape("netrc-inline", "machine 127.0.0.1 login bob password N3trcPassw0rd", ("N3trcPassw0rd",)),
    Shape("netrc-lines", "machine 127.0.0.1\n  login bob\n  password N3trcLinePw\n", ("N3trcLinePw",)),
    Shape("authorization-bearer", f"Authorization: Bearer {_r(AN, 40, 38)}", (_r(AN, 40, 38),)),
    Shape("authorization-basic", f"Authorization: Basic {DOCKER_AUTH}", (DOCKER_AUTH,)),
    Shape("authorization-bare", f"authorization={_r(AN, 32, 39)}", (_r(AN, 32, 39),)),
    Shape("sendgrid", f"SENDGRID {'SG' + '.' + _r(AN + '-_', 22, 40) + '.' + _r(AN + '-_', 43, 41)}",
          ("SG" + "." + _r(AN + "-_", 22, 40) + "." + _r(AN + "-_", 43, 41),)),
    Shape("twilio", f"twilio key {'SK' + _r(HEX, 32, 42)}", ("SK" + _r(HEX, 32, 42),)),
    Shape("shopify", f"shop token {'shp' + 'at_' + _r(HEX, 32, 43)}", ("shp" + "at_" + _r(HEX, 32, 43),)),
    Shape("datadog", f"DD_API_KEY={_r(HEX, 32, 44)}", (_r(HEX, 32, 44),)),
    Shape("api-key-flag", f"vllm serve m --api-key {_r(AN, 24, 45)} --port 8000", (_r(AN, 24, 45),)),
    Shape("password-kv", "password=hunter2x PASSWORD: 'swordfish'", ("hunter2x", "swordfish")),
    # issue 36: secrets written through an encoding, split, escaped, disguised, or in a key file
    Shape("dsn-percent-encoded", f"ERROR dsn=postgresql%3A%2F%2Fspecops%3A{_r(AN, 14, 46)}%40db%3A5432%2Fapp",
          (_r(AN, 14, 46),)),
    Shape("slack-json-escaped", '{"bot": "xo' + 'xb\\u002d1234567890\\u002d0987654321\\u002d' + _r(AN, 24, 47) + '"}',
          (_r(AN, 24, 47),)),
    Shape("hf-percent-encoded", f"GET /resolve?token=hf%5F{_r(AN, 34, 48)} 200", (_r(AN, 34, 48),)),
    Shape("sshpass", f"sshpass -p '{_r(AN, 12, 49)}' ssh root@127.0.0.1", (_r(AN, 12, 49),)),
    Shape("mysql-p", f"mysql -uroot -p{_r(AN, 12, 50)} specops", (_r(AN, 12, 50),)),
    Shape("json-escaped-quote", '{"password": "ab\\"' + _r(AN, 12, 51) + '"}', (_r(AN, 12, 51),)),
    Shape("zero-width-inside", f"token hf_{_r(AN, 10, 52)}\u200b{_r(AN, 24, 53)} used", (_r(AN, 24, 53),)),
    Shape("fullwidth-colon", f"password\uff1a{_r(AN, 14, 54)}", (_r(AN, 14, 54),)),
    Shape("yaml-block", f"db:\n  password: |\n    {_r(AN, 16, 55)}\n    {_r(AN, 16, 56)}\nport: 5432\n",
          (_r(AN, 16, 55), _r(AN, 16, 56))),
    Shape("putty-key", "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: specops\nPublic-Lines: 1\n"
          f"AAAAC3NzaC1lZDI1NTE5\nPrivate-Lines: 1\n{_r(B64, 48, 57)}\nPrivate-MAC: {_r(HEX, 64, 58)}\n",
          (_r(B64, 48, 57),)),
    # a token wrapped by a terminal's width: the head too short for its own rule, the rest on the next line
    Shape("hf-wrapped", f"login with {'hf' + '_' + _r(AN, 8, 59)}\n{_r(AN, 26, 60)} ok\n",
          (_r(AN, 8, 59), _r(AN, 26, 60))),
    Shape("github-wrapped", f"token {'gh' + 'p_' + _r(AN, 20, 61)}\n{_r(AN, 16, 62)}\n",
          (_r(AN, 20, 61), _r(AN, 16, 62))),
    Shape("pem-split-header", f"-----BEGIN RSA PRIVATE\nKEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
          (PEM_BODY,)),
)
