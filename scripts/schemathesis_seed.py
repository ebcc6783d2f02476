"""Seeds the team schemathesis tests with resources of every kind, and writes the ids they got as
schemathesis dictionaries bound to the path parameters that name them.

Operations on an id answer 404 to the random UUIDs a fuzzer draws, so nothing past the lookup
would be exercised: with the bindings, most of the generated ids are ids that exist (the other
rest stay random, so unknown ids are still tried). The description's links lead the stateful
phase from what it creates itself; this gives the other phases, and the lists the links start
from, something to find. Calls, chats, contacts, boards and tags come from
`switchboard admin seed-demo`, run before this; the rest is made here over the REST API.

Usage: schemathesis_seed.py <base URL> <key> <owner invitation URL>; prints the TOML to append to
the run's config.
"""

import json
import sys
import urllib.request
import uuid

BASE, KEY, OWNER_INVITE = sys.argv[1], sys.argv[2], sys.argv[3]


def call(method, path, body=None, content_type="application/json"):
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(f"{BASE}{path}", data=data, method=method)
    request.add_header("X-API-Key", KEY)
    if data is not None:
        request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["data"]


def upload(path, file_name, text):
    boundary = uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n'
        f"Content-Type: text/plain\r\n\r\n{text}\r\n--{boundary}--\r\n"
    ).encode()
    return call("POST", path, body, f"multipart/form-data; boundary={boundary}")


def ids(items):
    return [item["id"] for item in items]


# One knowledge base, every agent linked to it: any agent id goes with any of its entry ids.
kb = call("POST", "/knowledgebase", {"name": "Support", "description": "Shipping and returns"})["id"]
# Its entries come in two sets: one for the operations reached through an agent
# (/agents/{agentId}/knowledgebase/...), one for those reached by the knowledge base's id, so that
# a delete or refresh through one route leaves the other route something to act on.
def entries(family):
    references = [
        call("POST", f"/knowledgebase/{kb}/references", {"question": f"{q} ({family})", "answer": a})["id"]
        for q, a in [("Do you ship abroad?", "Yes, to 30 countries."), ("Can I return an order?", "Within 30 days.")]
        for _ in range(2)
    ]
    # On loopback, its scrapes fail at once (scraping refuses private addresses): never pending
    # for long, so a refresh is accepted.
    webpages = [
        call("POST", f"/knowledgebase/{kb}/webpages", {"name": f"FAQ {n}", "url": f"http://127.0.0.1:9/{family}/{n}"})["id"]
        for n in range(4)
    ]
    documents = [
        upload(f"/knowledgebase/{kb}/documents", f"{family}-{n}.txt", "Returns\n\nReturns are free within 30 days.")["id"]
        for n in range(4)
    ]
    return {"referenceId": references, "webpageId": webpages, "documentId": documents}


by_id, through_agent = entries("by-id"), entries("through-agent")
agents = []
for name in [f"Agent {n}" for n in range(12)]:
    agent = call("POST", "/agents", {"name": name, "type": "phone", "knowledgebaseId": kb})["id"]
    for text in (f"You are {name} at Acme.", f"You are {name} at Acme; be brief.", f"You are {name}; be kind."):
        call("PUT", f"/agents/{agent}/instructions", {"instructions": text})
    agents.append(agent)

# Contacts, and notes on the first: a note id goes with that contact id only.
contacts = ids(call("GET", "/contacts?limit=100"))
notes = [call("POST", f"/contacts/{contacts[0]}/notes", {"note": f"Called back ({n})."})["id"] for n in range(3)]
fields = [
    call("POST", "/contacts/custom-fields", {"name": name, "label": label, "type": kind})["id"]
    for name, label, kind in [("plan", "Plan", "text"), ("seats", "Seats", "number")]
]

# Members who signed in (an invitation accepted): the team's people for the member operations.
# The owner first: the oldest member (see scripts/schemathesis).
owner = {"token": OWNER_INVITE.rsplit("/", 1)[1], "password": "correct horse battery", "firstName": "Seed", "lastName": "Owner"}
call("POST", "/auth/accept-invite", owner)


def member(n):
    invitation = call("POST", "/members/invitations", {"email": f"member-{n}-{uuid.uuid4().hex[:8]}@seed.example"})
    token = invitation["url"].rsplit("/", 1)[1]
    accept = {"token": token, "password": "correct horse battery", "firstName": "Seed", "lastName": f"Member {n}"}
    return call("POST", "/auth/accept-invite", accept)["user"]["id"]


members = [member(n) for n in range(3)]


# Client subteams of the demo agency, without an allowance (the agency's credits stay for searches).
def subteam(n):
    body = {"firstName": "Seed", "lastName": "Client", "teamName": f"Client {n}", "email": f"client-{n}@seed.example"}
    return call("POST", "/agency/subteams", {**body, "totalMonthlyCredits": 0})["id"]


subteams = [subteam(n) for n in range(2)]

# One webhook (a receiver on loopback: the run allows private addresses) and a delivery of it.
webhook = call("POST", "/webhooks", {"url": "http://127.0.0.1:9/hook", "events": ["contact.created"]})["id"]
deliveries = [call("POST", f"/webhooks/{webhook}/test")["id"]]

dictionaries = {
    "agentId": agents,
    "knowledgebaseId": [kb],
    **by_id,
    "callId": ids(call("GET", "/calls?limit=100")),
    "chatId": ids(call("GET", "/chats?limit=100")),
    "contactId": contacts,
    "noteId": notes,
    "fieldId": fields,
    "tagId": ids(call("GET", "/tags")),
    "boardId": ids(call("GET", "/boards")),
    "webhookId": [webhook],
    "deliveryId": deliveries,
    "userId": members,
    "subteamId": subteams,
}
# `teamId`, an optional parameter of every operation, drawn at random names a team the agency
# does not own (403) most of the time, whatever the rest of the request: the key's own team
# (which `teamId` may name) keeps most requests on the team the seeded ids belong to.
dictionaries["teamId"] = [call("GET", "/me")["team"]["id"]]
lines = ["", "# Written by scripts/schemathesis_seed.py for this run: ids that exist."]
for name, values in dictionaries.items():
    if not values:
        raise SystemExit(f"seeding made no {name}")
    lines.append(f"dictionaries.{name}.values = {json.dumps(values)}")
lines.append("dictionaries.version.values = [1, 2]")
for name in [*dictionaries, "version"]:
    location = "query" if name == "teamId" else "path"
    lines.append(f'parameters."{location}.{name}" = {{ dictionary = "{name}", probability = 0.7 }}')
# Ids in bodies: an agent linked to the knowledge base, a contact put on the team's boards and
# given its tags. (The demo team has no users to assign: they come with subteams.)
for key, name in [
    ("body.knowledgebaseId", "knowledgebaseId"),
    ("body.boardIds[*]", "boardId"),
    ("body.tagIds[*]", "tagId"),
]:
    lines.append(f'parameters."{key}" = {{ dictionary = "{name}", probability = 0.7 }}')
# Deleting a parent (a knowledge base, an agent, a contact, a webhook) is given spares of its own,
# and not the ids schemathesis collects from answers: the seeded parents must outlive the deletes
# of what they hold (webpages, documents, notes, deliveries), which run beside them, whatever
# their order.
spares = {
    ("deleteKnowledgebase", "knowledgebaseId"): [
        call("POST", "/knowledgebase", {"name": f"Spare {n}"})["id"] for n in range(3)
    ],
    ("deleteAgent", "agentId"): [call("POST", "/agents", {"name": f"Spare {n}", "type": "chat"})["id"] for n in range(3)],
    ("deleteContact", "contactId"): [
        call("POST", "/contacts", {"number": f"+1415555{n:04d}", "firstName": "Spare"})["id"] for n in range(170, 173)
    ],
    # And the run's own key must never be revoked: revoking is given keys of its own.
    ("revokeApiKey", "keyId"): [call("POST", "/api-keys", {"name": f"spare {n}"})["id"] for n in range(3)],
    ("removeMember", "userId"): [member(n) for n in range(3, 6)],
    ("deleteSubteam", "subteamId"): [subteam(n) for n in range(2, 5)],
    ("deleteWebhook", "webhookId"): [
        call("POST", "/webhooks", {"url": f"http://127.0.0.1:9/spare/{n}", "events": ["contact.created"]})["id"]
        for n in range(3)
    ],
}
for (operation, parameter), values in spares.items():
    lines.append(f"dictionaries.spare_{operation}.values = {json.dumps(values)}")
for name, values in through_agent.items():
    lines.append(f"dictionaries.agent_{name}.values = {json.dumps(values)}")
# Tables last: every top-level key above must come before the first.
for (operation, parameter), values in spares.items():
    lines += ["", "[[operations]]", f'include-operation-id = "{operation}"']
    lines.append(f'parameters."path.{parameter}" = {{ dictionary = "spare_{operation}", probability = 0.7 }}')
    for phase in ("examples", "coverage", "fuzzing"):
        lines.append(f"phases.{phase}.extra-data-sources.responses = false")
# Only the paths of one entry: the first block that matches an operation is the one that counts,
# and the collections (the agent upload among them) have blocks of their own in schemathesis.toml.
lines += ["", "[[operations]]", 'include-path-regex = "^/agents/[^/]+/knowledgebase/[^/]+/"']
for name in through_agent:
    lines.append(f'parameters."path.{name}" = {{ dictionary = "agent_{name}", probability = 0.7 }}')
print("\n".join(lines))
