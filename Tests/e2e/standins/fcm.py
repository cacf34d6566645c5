"""A stand-in Firebase Cloud Messaging (HTTP v1) and Google OAuth token endpoint for the
end-to-end tests, over TLS (ALPN offers h2 and http/1.1).

    python3 fcm.py --port P --cert server.pem --key server-key.pem \
        --service-account-pub sa-pub.pem --client-email EMAIL --project PROJECT --log fcm.jsonl \
        [--token-uri https://127.0.0.1:P/token] [--access-token-lifetime S] \
        [--close-after N [--close-how goaway|close]]

(--close-after ends each HTTP/2 connection after N requests: standin.py, ENDING CONNECTIONS.)

`POST /token` (Google's OAuth 2.0 token endpoint for service accounts), a form with
`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` and `assertion=<JWT>`. The JWT must be
RS256, signed by the --service-account-pub key, with iss == EMAIL, aud == the token URI
(--token-uri, by default https://127.0.0.1:P/token), a scope containing
https://www.googleapis.com/auth/firebase.messaging, and iat <= now + 60 s < exp <= iat + 3600.
Answer: 200 {"access_token": "ya29.<random>", "expires_in": 3599, "token_type": "Bearer"}
(--access-token-lifetime S: "expires_in": S, and the token is refused S seconds later);
else 400 {"error": "invalid_grant", "error_description": ...} as Google answers (Google's
"invalid_scope", "unsupported_grant_type" or "invalid_request" where it uses those).

`POST /v1/projects/{PROJECT}/messages:send`, checked in this order:
1. the project is PROJECT                 else 403 PERMISSION_DENIED (no FcmError detail)
2. `authorization: Bearer <an access token this stand-in issued, not expired>`
                                          else 401 UNAUTHENTICATED
3. a JSON body {"message": {"token": "...", ...}} with only the fields FCM knows and `data`
   values that are strings               else 400 INVALID_ARGUMENT
Then the device token's prefix says what happens:
    gone-...  404 NOT_FOUND with errorCode UNREGISTERED
    busy-...  429 RESOURCE_EXHAUSTED (errorCode QUOTA_EXCEEDED) with `retry-after: 1` on the
              first 2 attempts for that token, then 200
    fail-...  503 UNAVAILABLE on the first attempt for that token, then 200
    hold-...  held (standin.Hold): answered 200 only after `POST /_release` (a slow FCM)
    others    200 {"name": "projects/PROJECT/messages/<id>"}
Errors have Google's shape: {"error": {"code", "message", "status", "details": [{"@type":
"type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode"}]}}.

Every request is appended to the --log file as one JSON line before it is answered (see LOG
LINE below; a held one when it is let go, with `"abandoned": true` if its client went away
first). `GET /_stats` (no authentication) answers the counts: {"requests", "delivered",
"byStatus", "byErrorCode", "tokensIssued", "attemptsByToken", "held", "abandoned", "holding"};
`tokensIssued` is how many access tokens /token gave out, so a test can see Midtier cache its
token instead of fetching one a message; `liveAccessTokens` how many of them have not expired.
`POST /_release` and `POST /_hold` let held requests go or hold again; `POST /_expire-tokens`
expires every access token issued so far (as if its hour had passed: the next send with one is
401). A log line names an access token by a hash only: `accessToken` on a send (the bearer it
carried), `issued` on a /token answer.
"""
import argparse
import json
import re
import secrets
import time
import urllib.parse

import jwt  # PyJWT
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

import standin

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
ACCESS_TOKEN_LIFETIME = 3599
MAX_ASSERTION_LIFETIME = 3600
CLOCK_SKEW = 60
FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
SEND_PATH = re.compile(r"/v1/projects/([^/]+)/messages:send")
# The fields of FCM's Message resource (a send names one target: here always `token`).
MESSAGE_FIELDS = {"name", "data", "notification", "android", "webpush", "apns", "fcm_options",
                  "fcmOptions", "token", "topic", "condition"}
# How many failed attempts the special tokens get before they succeed.
FAILURES_BEFORE_SUCCESS = {"busy-": 2, "fail-": 1}


class Refused(Exception):
    """A refusal: the HTTP status, the JSON answer, extra headers and the code for the log."""

    def __init__(self, status, body, code, headers=()):
        super().__init__(code)
        self.status, self.body, self.code, self.headers = status, body, code, list(headers)


def oauth_error(error, description):
    return Refused(400, {"error": error, "error_description": description}, error)


def google_error(code, status, message, error_code=None, headers=()):
    """Google's error shape; `error_code` adds FCM's FcmError detail."""
    error = {"code": code, "message": message, "status": status}
    if error_code:
        error["details"] = [{"@type": FCM_ERROR, "errorCode": error_code}]
    return Refused(code, {"error": error}, error_code or status, headers)


class Fcm:
    def __init__(self, public_key, client_email, project, token_uri, log, token_lifetime=ACCESS_TOKEN_LIFETIME):
        self.public_key, self.client_email, self.project = public_key, client_email, project
        self.token_uri, self.log, self.token_lifetime = token_uri, log, token_lifetime
        self.stats = standin.Stats("byErrorCode")
        self.stats.extra["tokensIssued"] = 0
        self.access_tokens = {}   # access token -> when it expires (seconds since 1970)
        self.attempts = {}        # device token -> attempts that got past every check
        self.hold = standin.Hold()

    # --- POST /token ---------------------------------------------------------------------------

    def issue_token(self, body):
        """The OAuth answer for a form body, or Refused."""
        try:
            form = urllib.parse.parse_qs(body.decode("utf-8"), strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            raise oauth_error("invalid_request", "The request body is not a form.")
        grant_type = form.get("grant_type", [None])
        assertion = form.get("assertion", [None])
        if len(grant_type) != 1 or len(assertion) != 1:
            raise oauth_error("invalid_request", "A parameter is repeated.")
        if grant_type[0] != GRANT_TYPE:
            raise oauth_error("unsupported_grant_type", f"Invalid grant_type: {grant_type[0]}")
        if not assertion[0]:
            raise oauth_error("invalid_request", "Missing required parameter: assertion")
        self.check_assertion(assertion[0])

        access_token = "ya29." + secrets.token_urlsafe(32)
        self.access_tokens[access_token] = time.time() + self.token_lifetime
        self.stats.extra["tokensIssued"] += 1
        return {"access_token": access_token, "expires_in": self.token_lifetime, "token_type": "Bearer"}

    def expire_tokens(self):
        """`POST /_expire-tokens`: every access token issued so far is expired from now on."""
        expired = time.time() - 1
        for token in self.access_tokens:
            self.access_tokens[token] = min(self.access_tokens[token], expired)

    def check_assertion(self, assertion):
        """The service account's JWT: RS256, signed by its key, with the right claims."""
        try:
            head = jwt.get_unverified_header(assertion)
        except jwt.PyJWTError:
            raise oauth_error("invalid_grant", "Invalid JWT: not a JWT.")
        if head.get("alg") != "RS256":
            raise oauth_error("invalid_grant", "Invalid JWT: the algorithm must be RS256.")
        try:
            # PyJWT checks the signature only; the claims are checked below, one by one, so
            # that each failure says what is wrong.
            claims = jwt.decode(assertion, self.public_key, algorithms=["RS256"],
                                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False,
                                         "verify_aud": False, "verify_iss": False})
        except jwt.PyJWTError:
            raise oauth_error("invalid_grant", "Invalid JWT Signature.")
        if claims.get("iss") != self.client_email:
            raise oauth_error("invalid_grant", "Invalid JWT: iss is not the service account.")
        if claims.get("aud") != self.token_uri:
            raise oauth_error("invalid_grant", "Invalid JWT: aud is not the token URI.")
        scope = claims.get("scope")
        if not isinstance(scope, str) or SCOPE not in scope.split(" "):
            raise oauth_error("invalid_scope", "The assertion's scope does not grant Firebase messaging.")
        iat, exp, now = claims.get("iat"), claims.get("exp"), time.time()
        if not (standin.whole_seconds(iat) and standin.whole_seconds(exp)):
            raise oauth_error("invalid_grant", "Invalid JWT: iat and exp must be whole numbers.")
        if iat > now + CLOCK_SKEW or exp <= now or exp <= iat or exp - iat > MAX_ASSERTION_LIFETIME:
            raise oauth_error("invalid_grant",
                              "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")

    # --- POST /v1/projects/{PROJECT}/messages:send ---------------------------------------------

    def check_bearer(self, authorization):
        scheme, _, token = (authorization or "").partition(" ")
        expires = self.access_tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if expires is None or expires <= time.time():
            raise google_error(401, "UNAUTHENTICATED",
                               "Request had invalid authentication credentials. Expected OAuth 2 access "
                               "token, login cookie or other valid authentication credential.")

    @staticmethod
    def check_message(body):
        """The `message` object of a send's body, or Refused(400)."""
        def invalid(text):
            return google_error(400, "INVALID_ARGUMENT", text, "INVALID_ARGUMENT")
        try:
            request = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise invalid("Invalid JSON payload received.")
        if not isinstance(request, dict) or not isinstance(request.get("message"), dict):
            raise invalid("Invalid JSON payload received. The request has no message.")
        unknown = set(request) - {"message", "validate_only", "validateOnly"}
        if unknown:
            raise invalid(f'Invalid JSON payload received. Unknown name "{sorted(unknown)[0]}": Cannot find field.')
        message = request["message"]
        unknown = set(message) - MESSAGE_FIELDS
        if unknown:
            raise invalid(f'Invalid JSON payload received. Unknown name "{sorted(unknown)[0]}" at \'message\': '
                          "Cannot find field.")
        if not isinstance(message.get("token"), str) or not message["token"]:
            raise invalid("The message has no registration token.")
        data = message.get("data", {})
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise invalid("Invalid value at 'message.data': every value must be a string.")
        return message

    def outcome(self, token):
        """What happens to a send that passed every check: (status, answer, code, headers)."""
        self.attempts[token] = self.attempts.get(token, 0) + 1
        if token.startswith("gone-"):
            raise google_error(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")
        for prefix, failures in FAILURES_BEFORE_SUCCESS.items():
            if token.startswith(prefix) and self.attempts[token] <= failures:
                if prefix == "busy-":
                    raise google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for sending messages.",
                                       "QUOTA_EXCEEDED", [("retry-after", "1")])
                raise google_error(503, "UNAVAILABLE", "The service is currently unavailable.", "UNAVAILABLE")
        return {"name": f"projects/{self.project}/messages/{secrets.randbelow(10 ** 19)}"}

    # --- the ASGI app ----------------------------------------------------------------------------

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await standin.lifespan(receive, send)
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/_stats" and method == "GET":
            stats = self.stats.as_json()
            stats["attemptsByToken"] = self.attempts
            stats["liveAccessTokens"] = sum(1 for expires in self.access_tokens.values() if expires > time.time())
            stats.update(self.hold.as_json())
            return await standin.answer(send, 200, stats)
        if await standin.control(self.hold, path, method, receive, send):
            return
        if path == "/_expire-tokens" and method == "POST":
            await standin.read_body(receive)
            self.expire_tokens()
            return await standin.answer(send, 200, {"expired": len(self.access_tokens)})

        body, _ = await standin.read_body(receive)
        send_path = SEND_PATH.fullmatch(path)
        kind = "oauth" if path == "/token" else "send"
        token = message = None
        headers = []
        try:
            if path == "/token" and method == "POST":
                status, answer = 200, self.issue_token(body)
            elif send_path and method == "POST":
                if send_path.group(1) != self.project:
                    # Google's IAM refusal: no FcmError detail, since no device token is at fault.
                    raise google_error(403, "PERMISSION_DENIED",
                                       f"Permission 'cloudmessaging.messages.create' denied on project {send_path.group(1)}.")
                self.check_bearer(standin.header(scope, "authorization"))
                message = self.check_message(body)
                token = message["token"]
                status, answer = 200, self.outcome(token)
            else:
                raise google_error(404, "NOT_FOUND", f"No {method} {path} here.")
            code = None
        except Refused as refusal:
            status, answer, code, headers = refusal.status, refusal.body, refusal.code, refusal.headers
        abandoned = kind == "send" and status == 200 and token.startswith("hold-") and await self.hold.wait(receive)

        # LOG LINE: one JSON object a request, written before the answer. `kind` is "oauth" for
        # /token and "send" for everything else; `message` is the message object that was sent;
        # `accessToken` (a send's bearer) and `issued` (a /token answer's) are hashes of tokens.
        scheme, _, bearer = (standin.header(scope, "authorization") or "").partition(" ")
        issued = answer.get("access_token") if kind == "oauth" and status == 200 else None
        self.log.write({"time": standin.now(), "kind": kind, "token": token, "status": status,
                        "errorCode": code, "message": message, "abandoned": abandoned,
                        "clientPort": standin.client_port(scope),
                        "accessToken": standin.digest(bearer.strip()) if kind == "send" and scheme.lower() == "bearer" else None,
                        "issued": standin.digest(issued)})
        self.stats.count(status, code, delivered=kind == "send" and status == 200)
        await standin.answer(send, status, answer, headers)


def main():
    parser = argparse.ArgumentParser(description="A stand-in FCM HTTP v1 and OAuth token endpoint for tests.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True, help="the server certificate (PEM)")
    parser.add_argument("--key", required=True, help="its private key (PEM)")
    parser.add_argument("--service-account-pub", required=True, help="the service account's public key (PEM)")
    parser.add_argument("--client-email", required=True, help="the service account's client_email")
    parser.add_argument("--project", required=True, help="the Firebase project id")
    parser.add_argument("--token-uri", help="the aud the assertion must name (default https://127.0.0.1:PORT/token)")
    parser.add_argument("--log", required=True, help="the JSON Lines file every request is appended to")
    parser.add_argument("--access-token-lifetime", type=int, default=ACCESS_TOKEN_LIFETIME, metavar="S",
                        help="the access tokens' expires_in, and how long they are taken; Google: 3599")
    standin.add_connection_options(parser)
    args = parser.parse_args()
    if args.close_after is not None and args.close_after < 1:
        parser.error("--close-after must be at least 1")

    with open(args.service_account_pub, "rb") as f:
        public_key = load_pem_public_key(f.read())
    if not isinstance(public_key, rsa.RSAPublicKey):
        parser.error("--service-account-pub must be an RSA public key")
    token_uri = args.token_uri or f"https://127.0.0.1:{args.port}/token"
    if args.access_token_lifetime < 1:
        parser.error("--access-token-lifetime must be at least 1")
    app = Fcm(public_key, args.client_email, args.project, token_uri, standin.JsonlLog(args.log), args.access_token_lifetime)
    standin.serve(app, args.port, args.cert, args.key, "fcm stand-in", args.close_after, args.close_how)


if __name__ == "__main__":
    main()
