"""schemathesis hooks for scripts/schemathesis.

A client sends a fresh Idempotency-Key with each new write; reusing one for another request is a
client error (422 IDEMPOTENCY_KEY_REUSED, documented). Generated keys repeat across cases ("0"
for every operation), so each valid generated key is made unique just before the call, as a
client would. Invalid keys (empty, too long, not printable ASCII) are sent as generated: the API
must refuse them with 400.

A stateful sequence follows the description's links from what one operation made or listed to
the operations on it, all in one team. A `teamId` drawn at random for a step (an optional
parameter of every operation) would move that step to a team the link's id does not belong to
(403 for a team the agency does not own, 404 in another subteam), so steps of the stateful phase
act on the key's own team; the other phases fuzz `teamId`, and tests/api/scoping.rs tests it.

The run's own key is never revoked (that would end the run with 401s): a revocation of it, which
the stateful phase can reach by following the links from the key list, revokes a random id
instead. tests/api/api_keys.rs tests a key revoking itself.
"""

import os
import uuid

import schemathesis

HEADER = "Idempotency-Key"
RUN_KEY_ID = os.environ.get("SCHEMATHESIS_RUN_KEY_ID", "")


def _valid(value):
    return isinstance(value, str) and 1 <= len(value.strip()) <= 255 and all(0x20 <= ord(c) <= 0x7E for c in value)


# The file part of an upload may be declared as any of the document types the API reads
# (the multipart `encoding` of the upload operations); schemathesis knows no serializer for the
# binary ones, so their generated values are sent as their bytes.
@schemathesis.serializer(
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/octet-stream",
)
def as_bytes(ctx, value):
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogatepass")


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if RUN_KEY_ID and case.operation.method.upper() == "DELETE" and case.path_parameters:
        if str(case.path_parameters.get("keyId", "")).lower() == RUN_KEY_ID:
            case.path_parameters["keyId"] = str(uuid.uuid4())
    meta = getattr(case, "meta", None)
    if meta is not None and meta.phase.name == "stateful" and case.query:
        case.query.pop("teamId", None)
    headers = case.headers
    if headers and HEADER in headers and _valid(headers[HEADER]):
        headers[HEADER] = f"schemathesis-{uuid.uuid4()}"
