#!/usr/bin/env python3
"""A token-broker consumer in Python: standard library + botocore (for SigV4) only.

What a service does around each vendor call (docs/vend-api.md is the reference):

  1. GET  /v1/credential-sets/{set}/token             -> accessToken, tokenId, vendorBaseUrl, tenant, classes
     the request's class: the first of `classes` with a path pattern its path matches (else general)
  2. POST /v1/credential-sets/{set}/permits           {tokenId, count, class?}; 429 -> wait Retry-After, ask again
  3. one permit per vendor request, sent within the grant's validity (validUntil - grantedAt) counted on this
     machine's monotonic clock from the permit request (not validUntil against this machine's wall clock)
  4. POST /v1/credential-sets/{set}/permits/returns   {tokenId, receipt, count}: the permits not used
  5. vendor 429 -> POST .../rate-limit-reports         {tokenId, retryAfterSeconds, class?}: every consumer waits
     a class answer whose X-RateLimit-Limit the grant's `remaining` has no window of for its class -> the same
     report with its X-RateLimit-* (limit, remaining, reset): the broker learns the class's limits from it
     vendor 401 TOKEN_EXPIRED/TOKEN_INVALID -> POST .../token/rejections {tokenId, errorCode}: a new token

Every broker request is signed with SigV4 for a Lambda Function URL with IAM auth: service "lambda", the
Region of the URL (https://<id>.lambda-url.<region>.on.aws), or AWS_REGION ("local" for `npm start`).
Credentials come from botocore's default chain (environment, profile, SSO, container, instance).

    export AWS_ACCESS_KEY_ID=AKIALOCALPORTFOLIO01 AWS_SECRET_ACCESS_KEY=local-only-portfolio-service-secret
    export AWS_REGION=local TOKEN_BROKER_URL=http://127.0.0.1:8787
    python3 examples/python/token_broker_example.py --set uat-advisor --calls 2
    # a request of the set's "reports" class (by its path, /reports/** in local/broker.config.json):
    python3 examples/python/token_broker_example.py --set uat-advisor --calls 1 --vendor-path /reports/daily/{tenant}

To see the vendor-429 path against `npm start`, make the uat sandbox (its URL is in the banner) answer the next
resource request 429 first:

    curl -X POST -d '{"errorCode":"RATE_LIMIT_EXCEEDED","target":"resources"}' "$UAT_SANDBOX_URL/_sandbox/faults"

Exit codes: 0 done, 1 the broker answered an error, 2 usage, 75 no permit within --max-wait.
The access token is never printed, only its tokenId (the broker's id for it).
"""

import argparse
import json
import os
import random
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    import botocore.session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
except ImportError:  # pragma: no cover - said plainly instead of a traceback
    sys.exit("token_broker_example: botocore is missing (pip install botocore, or apt-get install python3-botocore)")

FUNCTION_URL_HOST = re.compile(r"^[a-z0-9]+\.lambda-url\.([a-z0-9-]+)\.on\.aws$")
EX_TEMPFAIL = 75
# Kept of a permit's validity for sending the request after the last look at the clock (as the TypeScript client).
PERMIT_SAFETY_S = 0.5
# The vendor resource read by default: nobody creates it, so the vendor answers 404 (a call made under a permit).
DEFAULT_VENDOR_PATH = "/users/1/{tenant}/serviceKey/token-broker-example"


def log(message):
    print(message, flush=True)


class Broker:
    """The vend API over HTTP, every request signed with SigV4 (service "lambda")."""

    # 15 s: the broker itself waits up to 10 s for a re-login before it answers 503.
    def __init__(self, url, set_id, region, timeout=15.0):
        self.url = url.rstrip("/")
        self.set_id = set_id
        self.region = region
        self.timeout = timeout
        credentials = botocore.session.get_session().get_credentials()
        if credentials is None:
            sys.exit("token_broker_example: no AWS credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile)")
        self.credentials = credentials

    def call(self, method, path, body=None):
        """Sends one signed request; returns (status, headers, parsed JSON body or None)."""
        url = self.url + path
        headers = {"accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
            headers["content-type"] = "application/json"
        request = AWSRequest(method=method, url=url, data=data, headers=headers)
        # Frozen per request: a refreshable chain (SSO, instance role) may have rotated the keys meanwhile.
        # botocore adds X-Amz-Date and, with temporary credentials, X-Amz-Security-Token.
        SigV4Auth(self.credentials.get_frozen_credentials(), "lambda", self.region).add_auth(request)
        prepared = request.prepare()
        outgoing = urllib.request.Request(prepared.url, data=prepared.body, method=method, headers=dict(prepared.headers))
        try:
            with urllib.request.urlopen(outgoing, timeout=self.timeout) as response:
                return response.status, response.headers, parse_json(response.read())
        except urllib.error.HTTPError as error:
            return error.code, error.headers, parse_json(error.read())

    def set_path(self, rest):
        return "/v1/credential-sets/" + urllib.parse.quote(self.set_id, safe="") + rest


def parse_json(raw):
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def retry_after_seconds(headers, default=1):
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return default


def describe_error(status, answer):
    if isinstance(answer, dict) and "errorCode" in answer:
        reason = (answer.get("details") or {}).get("reason")
        return f"{status} {answer['errorCode']}" + (f" ({reason})" if reason else "")
    return str(status)


def quota_text(windows):
    if not windows:
        return "unknown"
    return ", ".join(
        f"{w['remaining']}/{w['limit']} per {w['windowSeconds']} s" + (f" ({w['class']})" if w.get("class") else "")
        for w in windows
    )


def class_of_path(classes, path):
    """The request's class: the first class (the broker lists them in configuration order) with a pattern the path
    matches, else None (general). `*` matches exactly one segment, `**` (only last) one or more, any other segment
    itself; one trailing slash of the path is not a segment. As shared/config/request-classes.ts."""
    segments = path[1:].split("/") if path.startswith("/") else None
    if segments is None:
        return None
    if len(segments) > 1 and segments[-1] == "":
        segments.pop()
    for entry in classes or []:
        for pattern in entry.get("paths", []):
            wanted = pattern[1:].split("/")
            rest = wanted[-1] == "**"
            fixed = wanted[:-1] if rest else wanted
            if len(segments) < len(fixed) + (1 if rest else 0) or (not rest and len(segments) != len(fixed)):
                continue
            if "" in segments:
                continue
            if all(w == "*" or w == s for w, s in zip(fixed, segments)):
                return entry["class"]
    return None


class BrokerError(Exception):
    pass


class GaveUp(Exception):
    pass


def get_token(broker, attempts=3):
    """GET .../token; a 503 (a re-login in progress) says Retry-After: wait and ask again, a few times."""
    for attempt in range(1, attempts + 1):
        status, headers, answer = broker.call("GET", broker.set_path("/token"))
        if status == 200:
            log(
                f"token: tokenId={answer['tokenId']} expiresInSeconds={answer['expiresInSeconds']} quota: {quota_text(answer.get('quota'))}"
            )
            return answer
        if status in (500, 502, 503, 504) and attempt < attempts:
            wait = retry_after_seconds(headers, 1)
            log(f"token: {describe_error(status, answer)}, asking again in {wait} s")
            time.sleep(wait)
            continue
        raise BrokerError(f"token: {describe_error(status, answer)}")
    raise BrokerError("token: no answer")


def take_permits(broker, token, count, max_wait_seconds, request_class=None):
    """POST .../permits; a 429 (no room, a cooldown after a vendor 429) says when to ask again.

    Asks for fewer, at once, when the broker says more could never be granted to this caller (400 on count:
    a reservation of another consumer leaves it less than asked) or not now (a 429's details.available). The
    grant's "most" is what to ask for at most next time (its maxCount; an older broker does not say it, and a
    400 of one is answered by halving the count).
    """
    waited = 0.0
    most = count
    while True:
        asked_at = time.monotonic()
        body = {"tokenId": token["tokenId"], "count": count}
        if request_class:
            body["class"] = request_class
        status, headers, answer = broker.call("POST", broker.set_path("/permits"), body)
        if status == 200:
            log(f"permits: granted {answer['granted']} of {count}, remaining {quota_text(answer.get('remaining'))}")
            # The grant came after asked_at: its validity counted from there ends no later than on the broker's
            # clock, whatever this machine's clock says. Half a second is kept for sending.
            answer["usable_until"] = asked_at + (answer["validUntil"] - answer["grantedAt"]) / 1000 - PERMIT_SAFETY_S
            answer["most"] = whole(answer.get("maxCount"), 1) or most
            return answer
        body = answer if isinstance(answer, dict) else {}
        details = body.get("details") or {}
        if status == 400 and body.get("errorCode") == "INVALID_VALUE" and details.get("field") == "count" and count > 1:
            said = whole(details.get("maxCount"), 1)
            most = count = said if said is not None and said < count else max(1, count // 2)
            # The broker's refusal, handled: the example asks for fewer (it is not a failure).
            log(f"permits: {describe_error(status, answer)}, expected: more than one grant can give, asking for {count}")
            continue
        if status == 429:
            available = whole(details.get("available"), 1)
            if available is not None and available < count:
                # Denied whole because the ask was larger than what this caller could have now: ask for that.
                log(f"permits: {describe_error(status, answer)}, {available} available now: asking for those")
                count = available
                continue
            # Retry-After is whole seconds; details.retryAfterMs, when there, is the exact wait.
            exact_ms = details.get("retryAfterMs")
            wait = exact_ms / 1000 if isinstance(exact_ms, (int, float)) and exact_ms > 0 else retry_after_seconds(headers)
            # A little jitter, so that consumers held back together do not all come back in the same instant.
            wait += random.uniform(0, 0.2)
            if waited + wait > max_wait_seconds:
                raise GaveUp(
                    f"permits: {describe_error(status, answer)}, Retry-After {retry_after_seconds(headers)} s: "
                    f"more than --max-wait {max_wait_seconds} s in all, giving up"
                )
            log(f"permits: {describe_error(status, answer)}, Retry-After {retry_after_seconds(headers)} s: waiting {wait:.1f} s")
            time.sleep(wait)
            waited += wait
            continue
        if status in (500, 502, 503, 504):
            # No ledger answer, no permit (fail closed): wait as told and ask again.
            wait = retry_after_seconds(headers, 1)
            if waited + wait > max_wait_seconds:
                raise GaveUp(f"permits: {describe_error(status, answer)}, giving up")
            log(f"permits: {describe_error(status, answer)}, asking again in {wait} s")
            time.sleep(wait)
            waited += wait
            continue
        raise BrokerError(f"permits: {describe_error(status, answer)}")


def whole(value, least):
    """The value if it is a whole number of at least `least` (a broker field may be absent), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= least else None


def give_back(broker, token, grant, unused):
    """POST .../permits/returns with the grant's receipt: the unused permits go back to everyone."""
    if unused <= 0:
        return
    status, _, answer = broker.call(
        "POST",
        broker.set_path("/permits/returns"),
        {"tokenId": token["tokenId"], "receipt": grant["receipt"], "count": unused},
    )
    if status == 200:
        log(f"give-back: returned {answer['returned']} of {unused} unused permit(s)")
    elif status == 409:
        # A re-sent give-back whose first answer was lost: the permits are back already.
        log(f"give-back: {describe_error(status, answer)}: already given back")
    else:
        # 410: the receipt's window passed, the permits lapsed on their own; nothing to do either way.
        log(f"give-back: {describe_error(status, answer)}")


def report_rate_limit(broker, token, vendor_headers, request_class=None):
    """The vendor answered 429: tell the broker, which holds every consumer of the token back."""
    body = {"tokenId": token["tokenId"], "retryAfterSeconds": retry_after_seconds(vendor_headers, 1)}
    if request_class:
        body["class"] = request_class
    for header, field in (("X-RateLimit-Limit", "limit"), ("X-RateLimit-Remaining", "remaining"), ("X-RateLimit-Reset", "reset")):
        value = vendor_headers.get(header)
        if value is not None and value.isdigit():
            body[field] = int(value)
    status, _, answer = broker.call("POST", broker.set_path("/rate-limit-reports"), body)
    if status == 204:
        log(f"rate-limit report: accepted ({status}), retryAfterSeconds={body['retryAfterSeconds']}")
    else:
        log(f"rate-limit report: {describe_error(status, answer)}")


def report_class_headers(broker, token, grant, request_class, vendor_headers, reported):
    """A class answer's X-RateLimit-* of a limit the broker's last word (the grant's `remaining`) has no window of
    for the class: report them, once per (limit, reset), so that the broker learns the class's limits."""
    values = {}
    for header, field in (("X-RateLimit-Limit", "limit"), ("X-RateLimit-Remaining", "remaining"), ("X-RateLimit-Reset", "reset")):
        value = vendor_headers.get(header) if vendor_headers is not None else None
        if value is None or not value.isdigit():
            return
        values[field] = int(value)
    known = [w for w in grant.get("remaining") or [] if w.get("class") == request_class]
    if any(w["limit"] == values["limit"] for w in known) or (values["limit"], values["reset"]) in reported:
        return
    reported.add((values["limit"], values["reset"]))
    body = {"tokenId": token["tokenId"], "class": request_class, **values}
    status, _, answer = broker.call("POST", broker.set_path("/rate-limit-reports"), body)
    if status == 204:
        log(f"class {request_class}: reported X-RateLimit-Limit {values['limit']}, not a limit the broker knows of it yet")
    else:
        log(f"class {request_class}: rate-limit report {describe_error(status, answer)}")


def report_rejection(broker, token, error_code, request_id):
    """The vendor refused the token (401 TOKEN_EXPIRED / TOKEN_INVALID): the broker answers a usable one."""
    body = {"tokenId": token["tokenId"], "errorCode": error_code}
    if request_id and re.fullmatch(r"[\w.:/-]{1,128}", request_id):
        body["requestId"] = request_id
    status, _, answer = broker.call("POST", broker.set_path("/token/rejections"), body)
    if status != 200:
        raise BrokerError(f"rejection report: {describe_error(status, answer)}")
    log(
        f"rejection report: accepted, tokenId={answer['tokenId']} reloggedIn={answer.get('reloggedIn')}"
    )
    return answer


def vendor_path(token, path_template):
    return path_template.format(tenant=urllib.parse.quote(token["tenant"], safe=""))


def call_vendor(token, path_template):
    """One vendor request with the token (sent under a permit). Returns (status, headers, body)."""
    base = token.get("vendorBaseUrl")
    if not base:
        raise BrokerError("the token answer names no vendorBaseUrl")
    url = base.rstrip("/") + vendor_path(token, path_template)
    request = urllib.request.Request(
        url, method="GET", headers={"authorization": "Bearer " + token["accessToken"], "accept": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, parse_json(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, parse_json(error.read())


def vendor_error_code(answer):
    if not isinstance(answer, dict):
        return None
    if isinstance(answer.get("error"), dict):  # the 429's nested shape
        return answer["error"].get("code")
    return answer.get("errorCode")


def expected_note(args, status):
    """The default resource is never created, so its 404 is the answer the example expects, not a failure."""
    if status == 404 and args.vendor_path == DEFAULT_VENDOR_PATH:
        return " (expected: the example reads a key nobody created; the call still used its permit)"
    return ""


def run(args):
    broker = Broker(args.url, args.set, args.region)
    token = get_token(broker)
    done = 0
    rejections = 0
    permits = args.permits
    # The request's class by its path; older brokers list no classes (then every request is general here).
    request_class = class_of_path(token.get("classes"), vendor_path(token, args.vendor_path))
    if request_class:
        log(f"request class: {request_class} (by its path)")
    reported = set()
    while done < args.calls:
        # A batch: what is not used goes back with the receipt (a real client sizes it to its pace), never more
        # than one grant can give this caller (with reservations on the set, it may be less than asked).
        grant = take_permits(broker, token, permits, args.max_wait, request_class)
        permits = min(args.permits, grant["most"])
        used = 0
        outcome = None
        while used < grant["granted"] and done < args.calls:
            if time.monotonic() >= grant["usable_until"]:
                log("permits: the grant's validity ran out; asking for new ones")
                break
            used += 1
            status, headers, answer = call_vendor(token, args.vendor_path)
            code = vendor_error_code(answer)
            if status == 429:
                log(f"vendor call {done + 1}: 429 {code}, Retry-After {retry_after_seconds(headers)} s")
                outcome = ("rate-limited", headers)
                break
            if status == 401 and code in ("TOKEN_EXPIRED", "TOKEN_INVALID"):
                log(f"vendor call {done + 1}: 401 {code}")
                outcome = ("rejected", code, headers.get("X-Request-Id"))
                break
            done += 1
            log(f"vendor call {done}: {status}" + (f" {code}" if code else "") + expected_note(args, status))
            if request_class and 200 <= status < 300:
                report_class_headers(broker, token, grant, request_class, headers, reported)
        if outcome and outcome[0] == "rate-limited":
            # First the report, so that every consumer of the token holds back; the call is then made again
            # under a new permit, whose 429 says how long the token cools down.
            report_rate_limit(broker, token, outcome[1], request_class)
        # Permits in hand are given back: unused at the end, or useless after a 429 or a rejected token.
        give_back(broker, token, grant, grant["granted"] - used)
        if outcome and outcome[0] == "rejected":
            rejections += 1
            if rejections > 1:
                raise BrokerError("the vendor rejected the broker's new token as well")
            token = report_rejection(broker, token, outcome[1], outcome[2])
    log(f"done: {done} vendor call(s) made under permits")


def main(argv=None):
    parser = argparse.ArgumentParser(description="token-broker consumer example (SigV4 with botocore)")
    parser.add_argument("--url", default=os.environ.get("TOKEN_BROKER_URL"), help="vend URL (TOKEN_BROKER_URL)")
    parser.add_argument("--set", default=os.environ.get("TOKEN_BROKER_SET"), help="credential set id (TOKEN_BROKER_SET)")
    parser.add_argument("--region", help="SigV4 Region: default the Function URL's, else AWS_REGION / AWS_DEFAULT_REGION")
    parser.add_argument("--calls", type=int, default=2, help="vendor requests to make (default 2)")
    parser.add_argument("--permits", type=int, default=5, help="permits to ask for at most at once (default 5)")
    parser.add_argument("--max-wait", type=float, default=120.0, help="most seconds to wait for permits in all (default 120)")
    parser.add_argument(
        "--vendor-path",
        default=DEFAULT_VENDOR_PATH,
        help="the vendor resource read on each call ({tenant} is the token's tenant; a path of a class, e.g. "
        "/reports/daily/{tenant}, takes permits of that class)",
    )
    args = parser.parse_args(argv)
    if not args.url or not args.set:
        parser.error("give --url (or TOKEN_BROKER_URL) and --set (or TOKEN_BROKER_SET)")
    if args.calls < 0 or args.permits < 1:
        parser.error("--calls must be at least 0 and --permits at least 1")
    host = urllib.parse.urlsplit(args.url).hostname or ""
    from_url = FUNCTION_URL_HOST.match(host)
    args.region = args.region or (from_url and from_url.group(1)) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not args.region:
        parser.error("no Region: give --region, or set AWS_REGION (local for the local broker)")
    log(f"broker {args.url}, set {args.set}, region {args.region}")
    try:
        run(args)
    except GaveUp as error:
        log(str(error))
        return EX_TEMPFAIL
    except BrokerError as error:
        log(f"error: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
