"""A stand-in Apple Push Notification service for the end-to-end tests: HTTP/2 over TLS, token
(JWT) authentication, Apple's answers and reasons.

    python3 apns.py --port P --cert server.pem --key server-key.pem --auth-key-pub apns-pub.pem \
        --team TEAM --key-id KID --topic TOPIC --log deliveries.jsonl \
        [--provider-token-lifetime S] [--close-after N [--close-how goaway|close]]

(--close-after ends each HTTP/2 connection after N requests: standin.py, ENDING CONNECTIONS.)

`POST /3/device/{token}` is checked in this order, each failure answered as Apple does, with
`{"reason": ...}` and an `apns-id` header:

1. HTTP/2 only (APNs speaks nothing else)          else 505 HTTP2Required (not an Apple reason)
2. `authorization: bearer <JWT>`: header alg ES256 and kid == KID, signature verified with the
   --auth-key-pub key, claim iss == TEAM             else 403 MissingProviderToken / InvalidProviderToken
   and iat within the last hour (--provider-token-lifetime S: the last S seconds)
                                                    else 403 ExpiredProviderToken
3. `apns-topic` == TOPIC                            else 400 MissingTopic / TopicDisallowed
4. the optional headers are well formed: apns-priority 1, 5 or 10 (BadPriority), apns-expiration
   a whole number (BadExpirationDate), apns-push-type a known type (InvalidPushType),
   apns-collapse-id at most 64 bytes (BadCollapseId), apns-id a UUID (BadMessageId)
5. the body: at most 4096 bytes                     else 413 PayloadTooLarge
   a JSON object with an `aps` object              else 400 PayloadEmpty
6. the device token is hex                          else 400 BadDeviceToken (empty: MissingDeviceToken)

Then the token's first hex digits say what happens (the test chooses them):
    0410...  410 Unregistered, with the `timestamp` (ms) since when the token is invalid
    0400...  400 BadDeviceToken
    0429...  429 TooManyRequests with `retry-after: 1` on the first 2 attempts, then 200
    0500...  500 InternalServerError on the first attempt, then 200
    0777...  held (standin.Hold): answered 200 only after `POST /_release` (a slow APNs)
    others   200 with an `apns-id` header (the request's apns-id when it sent one)

Every request, accepted or not, is appended to the --log file as one JSON line (see LOG LINE
below; `providerToken` names the bearer JWT by a hash and its iat, never by its text) before it
is answered (a held one when it is let go, with `"abandoned": true` if its
client went away first). `GET /_stats` (no authentication, any HTTP version) answers the
counts: {"requests", "delivered", "byStatus", "byReason", "providerTokens" (how many different
provider tokens verified), "attemptsByToken", "held", "abandoned", "holding"}; `POST /_release` and `POST /_hold` let held requests go or hold again.
"""
import argparse
import json
import re
import time
import uuid

import jwt  # PyJWT
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_public_key

import standin

MAX_PAYLOAD = 4096                 # Apple's limit for a regular (not VoIP) notification
TOKEN_LIFETIME = 3600              # a provider token is refused an hour after its iat
CLOCK_SKEW = 60                    # an iat this far in the future is still accepted
PUSH_TYPES = {"alert", "background", "location", "voip", "complication", "fileprovider", "mdm",
              "liveactivity", "pushtotalk", "widgets", "controls"}
HEX = re.compile(r"[0-9a-fA-F]+")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

# How many failed attempts the special tokens get before they succeed.
FAILURES_BEFORE_SUCCESS = {"0429": 2, "0500": 1}


class Refused(Exception):
    """A request Apple would refuse: the status and Apple's reason."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status, self.reason = status, reason


class Apns:
    def __init__(self, public_key, team, key_id, topic, log, token_lifetime=TOKEN_LIFETIME):
        self.public_key, self.team, self.key_id, self.topic = public_key, team, key_id, topic
        self.log = log
        self.token_lifetime = token_lifetime
        self.stats = standin.Stats("byReason")
        self.stats.extra["providerTokens"] = 0
        self.attempts = {}        # device token -> attempts that got past every check
        self.verified = {}        # JWT text -> its iat, for JWTs whose signature verified
        self.hold = standin.Hold()

    # --- the checks, in the order Apple makes them -------------------------------------------

    def check_provider_token(self, authorization):
        """Step 2: the bearer JWT. Verifying a signature costs time, and a provider sends the same
        JWT for up to an hour, so a verified JWT is remembered (its iat is still checked)."""
        if not authorization:
            raise Refused(403, "MissingProviderToken")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(403, "InvalidProviderToken")
        token = token.strip()
        iat = self.verified.get(token)
        if iat is None:
            iat = self.verify_jwt(token)
            if len(self.verified) > 1000:     # bounded: a test never needs more
                self.verified.clear()
            self.verified[token] = iat
            self.stats.extra["providerTokens"] += 1
        now = time.time()
        if iat > now + CLOCK_SKEW:
            raise Refused(403, "InvalidProviderToken")
        if iat <= now - self.token_lifetime:
            raise Refused(403, "ExpiredProviderToken")

    def verify_jwt(self, token):
        """The JWT's iat when its header, signature and issuer are right; else Refused(403)."""
        try:
            head = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Refused(403, "InvalidProviderToken")
        if head.get("alg") != "ES256" or head.get("kid") != self.key_id:
            raise Refused(403, "InvalidProviderToken")
        try:
            # Only the signature is checked by PyJWT; the claims are checked below, by hand,
            # so that each failure gets Apple's reason.
            claims = jwt.decode(token, self.public_key, algorithms=["ES256"],
                                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False,
                                         "verify_aud": False, "verify_iss": False})
        except jwt.PyJWTError:
            raise Refused(403, "InvalidProviderToken")
        iat = claims.get("iat")
        if claims.get("iss") != self.team or not standin.whole_seconds(iat):
            raise Refused(403, "InvalidProviderToken")
        return int(iat)

    def check_topic(self, topic):
        """Step 3."""
        if topic is None:
            raise Refused(400, "MissingTopic")
        if topic != self.topic:
            raise Refused(400, "TopicDisallowed")

    @staticmethod
    def check_headers(headers):
        """Step 4: the optional headers, when present, are well formed."""
        if headers["apns-priority"] is not None and headers["apns-priority"] not in ("1", "5", "10"):
            raise Refused(400, "BadPriority")
        if headers["apns-expiration"] is not None and not re.fullmatch(r"[0-9]+", headers["apns-expiration"]):
            raise Refused(400, "BadExpirationDate")
        if headers["apns-push-type"] is not None and headers["apns-push-type"] not in PUSH_TYPES:
            raise Refused(400, "InvalidPushType")
        if headers["apns-collapse-id"] is not None and len(headers["apns-collapse-id"].encode("latin-1")) > 64:
            raise Refused(400, "BadCollapseId")
        if headers["apns-id"] is not None and not UUID.fullmatch(headers["apns-id"]):
            raise Refused(400, "BadMessageId")

    @staticmethod
    def check_payload(body, length):
        """Step 5: the payload as JSON (for the log), or Refused."""
        if length > MAX_PAYLOAD:
            raise Refused(413, "PayloadTooLarge")
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise Refused(400, "PayloadEmpty")
        if not isinstance(payload, dict) or not isinstance(payload.get("aps"), dict):
            raise Refused(400, "PayloadEmpty")
        return payload

    @staticmethod
    def check_device_token(token):
        """Step 6."""
        if not token:
            raise Refused(400, "MissingDeviceToken")
        if len(token) > 200 or not HEX.fullmatch(token):
            raise Refused(400, "BadDeviceToken")

    def outcome(self, token):
        """What happens to a request that passed every check: (status, reason, extra headers)."""
        self.attempts[token] = self.attempts.get(token, 0) + 1
        prefix = token[:4]
        if prefix == "0410":
            return 410, "Unregistered", []
        if prefix == "0400":
            return 400, "BadDeviceToken", []
        if prefix in FAILURES_BEFORE_SUCCESS and self.attempts[token] <= FAILURES_BEFORE_SUCCESS[prefix]:
            if prefix == "0429":
                return 429, "TooManyRequests", [("retry-after", "1")]
            return 500, "InternalServerError", []
        return 200, None, []

    # --- the ASGI app ------------------------------------------------------------------------

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await standin.lifespan(receive, send)
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/_stats" and method == "GET":
            stats = self.stats.as_json()
            stats["attemptsByToken"] = self.attempts
            stats.update(self.hold.as_json())
            return await standin.answer(send, 200, stats)
        if await standin.control(self.hold, path, method, receive, send):
            return

        headers = {name: standin.header(scope, name) for name in
                   ("apns-topic", "apns-id", "apns-priority", "apns-expiration", "apns-push-type",
                    "apns-collapse-id")}
        body, length = await standin.read_body(receive)
        token = path[len("/3/device/"):] if path.startswith("/3/device/") else None
        apns_id = headers["apns-id"] if headers["apns-id"] and UUID.fullmatch(headers["apns-id"]) \
            else str(uuid.uuid4()).upper()
        payload = None
        extra = []
        try:
            if scope.get("http_version") != "2":
                raise Refused(505, "HTTP2Required")
            if token is None:
                raise Refused(404, "BadPath")
            if method != "POST":
                raise Refused(405, "MethodNotAllowed")
            self.check_provider_token(standin.header(scope, "authorization"))
            self.check_topic(headers["apns-topic"])
            self.check_headers(headers)
            payload = self.check_payload(body, length)
            self.check_device_token(token)
            status, reason, extra = self.outcome(token)
        except Refused as refusal:
            status, reason = refusal.status, refusal.reason
        abandoned = status == 200 and token.startswith("0777") and await self.hold.wait(receive)

        # LOG LINE: one JSON object a request, written before the answer. `providerToken` is
        # {"hash", "iat"} of the bearer JWT (iat null unless its signature verified), or null.
        scheme, _, bearer = (standin.header(scope, "authorization") or "").partition(" ")
        bearer = bearer.strip() if scheme.lower() == "bearer" else ""
        provider_token = {"hash": standin.digest(bearer), "iat": self.verified.get(bearer)} if bearer else None
        self.log.write({
            "time": standin.now(), "token": token, "status": status, "reason": reason,
            "topic": headers["apns-topic"], "apns-id": apns_id,
            "apns-priority": headers["apns-priority"], "apns-expiration": headers["apns-expiration"],
            "apns-push-type": headers["apns-push-type"], "apns-collapse-id": headers["apns-collapse-id"],
            "payload": payload, "abandoned": abandoned, "clientPort": standin.client_port(scope),
            "providerToken": provider_token})
        self.stats.count(status, reason, delivered=status == 200)

        response_headers = [("apns-id", apns_id)] + extra
        if status == 200:
            return await standin.answer(send, 200, None, response_headers)
        answer = {"reason": reason}
        if status == 410:
            answer["timestamp"] = int(time.time() * 1000)
        await standin.answer(send, status, answer, response_headers)


def main():
    parser = argparse.ArgumentParser(description="A stand-in APNs (HTTP/2 over TLS) for tests.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True, help="the server certificate (PEM)")
    parser.add_argument("--key", required=True, help="its private key (PEM)")
    parser.add_argument("--auth-key-pub", required=True, help="the public key of the .p8 signing key (PEM)")
    parser.add_argument("--team", required=True, help="the team id the JWT's iss must name")
    parser.add_argument("--key-id", required=True, help="the key id the JWT's kid must name")
    parser.add_argument("--topic", required=True, help="the only apns-topic accepted (the bundle id)")
    parser.add_argument("--log", required=True, help="the JSON Lines file every request is appended to")
    parser.add_argument("--provider-token-lifetime", type=int, default=TOKEN_LIFETIME, metavar="S",
                        help="refuse a provider token S seconds after its iat (ExpiredProviderToken); Apple: 3600")
    standin.add_connection_options(parser)
    args = parser.parse_args()
    if args.close_after is not None and args.close_after < 1:
        parser.error("--close-after must be at least 1")

    with open(args.auth_key_pub, "rb") as f:
        public_key = load_pem_public_key(f.read())
    if not isinstance(public_key, ec.EllipticCurvePublicKey) or public_key.curve.name != "secp256r1":
        parser.error("--auth-key-pub must be an EC P-256 public key")
    if args.provider_token_lifetime < 1:
        parser.error("--provider-token-lifetime must be at least 1")
    app = Apns(public_key, args.team, args.key_id, args.topic, standin.JsonlLog(args.log), args.provider_token_lifetime)
    standin.serve(app, args.port, args.cert, args.key, "apns stand-in", args.close_after, args.close_how)


if __name__ == "__main__":
    main()
