"""Drives Arbor's SCIM 2.0 server (RFC 7643/7644) with the real scim2-client library.

Replays the provisioning flows Microsoft Entra ID and Okta use against `<base>/scim/v2`:
discovery, user create / conflict / filter / pagination / PATCH / PUT / deactivate / delete,
group push / member add / rename / member removal, and the errors for bad input. Every
response goes through scim2-client's checks (status codes, `application/scim+json` content
type, payload validation against the schemas the server publishes).

Run by tests/it/scim.rs with the SDK venv's python and two environment variables:

    ARBOR_SCIM_URL=http://127.0.0.1:PORT/scim/v2 ARBOR_SCIM_TOKEN=<bearer> python check.py

Prints `ok <step>` per step and `all ok` at the end; at the first failure prints
`FAIL <step>: ...` (with a traceback) to stderr and exits 1.
"""

import os
import sys
import traceback
from types import SimpleNamespace

import httpx2
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_models import PatchOp, PatchOperation, SCIMException, SearchRequest

PATCH_OP_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp"

base_url = os.environ["ARBOR_SCIM_URL"]
token = os.environ["ARBOR_SCIM_TOKEN"]
# scim2-client's httpx2 engine sends bodies with httpx2's `json=` (Content-Type: application/json)
# and no Accept header. Entra ID and Okta send `application/scim+json`, so it is set here for
# every request; create_second_user sends plain `application/json` once (RFC 7644 §8.1).
SCIM_JSON = "application/scim+json"
http = httpx2.Client(
    base_url=base_url,
    headers={"Authorization": f"Bearer {token}", "Accept": SCIM_JSON, "Content-Type": SCIM_JSON},
    timeout=30,
)
scim = SyncSCIMClient(http)

# Filled as the steps run: the discovered models and the ids the server handed out.
s = SimpleNamespace()


# --- helpers -------------------------------------------------------------------------------


def expect_scim_error(status, scim_types, call):
    """Run `call`, which must fail with a SCIM error of `status` (and a scimType in `scim_types`,
    unless that is None). scim2-client raises the server's Error object as a SCIMException whose
    `status` / `scim_type` are the values the server sent."""
    try:
        result = call()
    except SCIMException as exc:
        assert exc.status == status, f"expected status {status}, got {exc.status} ({exc.scim_type!r}: {exc})"
        if scim_types is not None:
            assert exc.scim_type in scim_types, f"expected scimType in {scim_types}, got {exc.scim_type!r} ({exc})"
        return exc
    raise AssertionError(f"expected a SCIM error {status}, got success: {result!r}")


def users_where(filter_, **params):
    """GET /Users?filter=... (plus startIndex/count), parsed as a ListResponse[User]."""
    return scim.query(s.User, query_parameters=SearchRequest[s.User](filter=filter_, **params))


def patch(model, id_, *operations):
    """PATCH /<type>/<id> with a PatchOp built from scim2_models (op names go out lowercase).
    The server may answer 200 with the resource or 204; the steps re-read it either way."""
    return scim.modify(model, id_, PatchOp[model](operations=[PatchOperation[model](**op) for op in operations]))


def member_ids(group):
    return sorted(m.value for m in group.members or [])


# --- steps ---------------------------------------------------------------------------------


def discover():
    # GET /ResourceTypes, /Schemas, /ServiceProviderConfig; the models are built from /Schemas.
    scim.discover()
    s.User = scim.get_resource_model("User")
    s.Group = scim.get_resource_model("Group")
    assert s.User is not None and s.Group is not None, "discovery found no User or Group resource type"
    assert str(s.User.__schema__) == "urn:ietf:params:scim:schemas:core:2.0:User", s.User.__schema__
    assert str(s.Group.__schema__) == "urn:ietf:params:scim:schemas:core:2.0:Group", s.Group.__schema__
    config = scim.provider.config
    assert config is not None and config.patch and config.patch.supported, "ServiceProviderConfig must advertise patch"
    assert config.filter and config.filter.supported, "ServiceProviderConfig must advertise filter"


def create_user():
    # The discovered models take the wire (camelCase) names. scim2_models' own `User` would
    # refuse `ada@example.test` (pydantic's EmailStr rejects the special-use `.test` domain).
    s.ada = s.User.model_validate(
        {
            "userName": "ada@example.test",
            "externalId": "ext-ada",
            "name": {"formatted": "Ada Lovelace"},
            "displayName": "Ada Lovelace",
            "emails": [{"value": "ada@example.test", "type": "work", "primary": True}],
            "active": True,
        }
    )
    created = scim.create(s.ada)  # POST /Users, the library insists on 201
    assert isinstance(created, s.User), created
    assert created.id, f"no id in {created!r}"
    assert created.user_name == "ada@example.test", created.user_name
    assert created.external_id == "ext-ada", created.external_id
    assert created.active is True, created.active
    assert created.display_name == "Ada Lovelace", created.display_name
    assert [e.value for e in created.emails or []] == ["ada@example.test"], created.emails
    s.ada_id = created.id


def create_user_conflict():
    expect_scim_error(409, {"uniqueness"}, lambda: scim.create(s.ada))


def filter_users():
    found = users_where('userName eq "ada@example.test"')
    assert found.total_results == 1, f"userName filter: totalResults {found.total_results}"
    assert [u.id for u in found.resources or []] == [s.ada_id], found.resources

    found = users_where('externalId eq "ext-ada"')
    assert found.total_results == 1, f"externalId filter: totalResults {found.total_results}"
    assert [u.id for u in found.resources or []] == [s.ada_id], found.resources

    found = users_where('userName eq "nobody@example.test"')
    assert found.total_results == 0, f"unknown userName: totalResults {found.total_results}"
    assert not found.resources, found.resources


def create_second_user():
    bob = s.User.model_validate(
        {
            "userName": "bob@example.test",
            "externalId": "ext-bob",
            "name": {"formatted": "Bob"},
            "displayName": "Bob",
            "emails": [{"value": "bob@example.test", "type": "work", "primary": True}],
            "active": True,
        }
    )
    # The older media type, as scim2-client would send it by default, must be accepted too.
    created = scim.create(bob, headers={"Content-Type": "application/json"})
    assert created.id and created.id != s.ada_id, created.id
    assert created.user_name == "bob@example.test", created.user_name
    s.bob_id = created.id


def paginate_users():
    first = scim.query(s.User, query_parameters=SearchRequest[s.User](start_index=1, count=1))
    assert (first.total_results or 0) >= 2, f"totalResults {first.total_results}"
    assert first.items_per_page == 1, f"itemsPerPage {first.items_per_page}"
    assert first.start_index == 1, f"startIndex {first.start_index}"
    assert len(first.resources or []) == 1, first.resources

    second = scim.query(s.User, query_parameters=SearchRequest[s.User](start_index=2, count=1))
    assert second.items_per_page == 1 and len(second.resources or []) == 1, second
    assert second.start_index == 2, f"startIndex {second.start_index}"
    assert second.resources[0].id != first.resources[0].id, "page 2 repeats page 1"


def patch_user_entra():
    # Entra ID sends the op capitalised ("Replace"). PatchOp would lowercase it on the way out,
    # so this one is passed as a dict, which scim.modify sends as is (the response is still checked).
    body = {
        "schemas": [PATCH_OP_SCHEMA],
        "Operations": [{"op": "Replace", "path": "displayName", "value": "Ada King"}],
    }
    scim.modify(s.User, s.ada_id, body)
    ada = scim.query(s.User, s.ada_id)
    assert ada.display_name == "Ada King", ada.display_name
    assert ada.user_name == "ada@example.test", ada.user_name


def replace_user():
    bob = scim.query(s.User, s.bob_id)
    bob.display_name = "Bob Builder"
    replaced = scim.replace(bob)  # PUT /Users/<id>, 200 with the resource
    assert replaced.display_name == "Bob Builder", replaced.display_name
    again = scim.query(s.User, s.bob_id)
    assert again.display_name == "Bob Builder", again.display_name
    assert again.user_name == "bob@example.test", again.user_name
    assert again.external_id == "ext-bob", again.external_id


def create_group():
    group = s.Group.model_validate(
        {"displayName": "engineering", "externalId": "ext-eng", "members": [{"value": s.ada_id}]}
    )
    created = scim.create(group)  # POST /Groups
    assert created.id, f"no id in {created!r}"
    assert created.display_name == "engineering", created.display_name
    assert member_ids(created) == [s.ada_id], created.members
    s.group_id = created.id


def group_add_member():
    patch(s.Group, s.group_id, {"op": "add", "path": "members", "value": [{"value": s.bob_id}]})
    group = scim.query(s.Group, s.group_id)
    assert member_ids(group) == sorted([s.ada_id, s.bob_id]), group.members


def group_rename():
    patch(s.Group, s.group_id, {"op": "replace", "path": "displayName", "value": "platform"})
    group = scim.query(s.Group, s.group_id)
    assert group.display_name == "platform", group.display_name

    # Okta renames with a full PUT carrying the members it knows.
    group.display_name = "platform-eng"
    replaced = scim.replace(group)
    assert replaced.display_name == "platform-eng", replaced.display_name
    group = scim.query(s.Group, s.group_id)
    assert group.display_name == "platform-eng", group.display_name
    assert member_ids(group) == sorted([s.ada_id, s.bob_id]), group.members


def group_remove_member():
    patch(s.Group, s.group_id, {"op": "remove", "path": f'members[value eq "{s.ada_id}"]'})
    group = scim.query(s.Group, s.group_id)
    assert member_ids(group) == [s.bob_id], group.members


def deactivate_user_okta():
    # Okta: a replace with no path and a partial resource as the value.
    patch(s.User, s.ada_id, {"op": "replace", "value": {"active": False}})
    ada = scim.query(s.User, s.ada_id)
    assert ada.active is False, ada.active
    assert ada.display_name == "Ada King", ada.display_name


def bad_input():
    # scim2_models refuses both requests client side, so they go out raw through the library:
    # a PatchOp dict is sent as is, and check_request_payload=False sends the query parameters
    # unvalidated. The server's answers still go through the library's checks.
    body = {"schemas": [PATCH_OP_SCHEMA], "Operations": [{"op": "replace", "path": "nonsense", "value": 1}]}
    expect_scim_error(400, {"invalidPath", "noTarget"}, lambda: scim.modify(s.User, s.ada_id, body))
    expect_scim_error(
        400,
        {"invalidFilter"},
        lambda: scim.query(s.User, query_parameters={"filter": "userName eq"}, check_request_payload=False),
    )


def delete_user():
    assert scim.delete(s.User, s.bob_id) is None  # DELETE /Users/<id>, the library insists on 204
    expect_scim_error(404, None, lambda: scim.query(s.User, s.bob_id))


STEPS = [
    discover,
    create_user,
    create_user_conflict,
    filter_users,
    create_second_user,
    paginate_users,
    patch_user_entra,
    replace_user,
    create_group,
    group_add_member,
    group_rename,
    group_remove_member,
    deactivate_user_okta,
    bad_input,
    delete_user,
]


def main():
    for step in STEPS:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - report any failure, with the step it happened in
            traceback.print_exc()
            notes = "".join(f"\n  {note}" for note in getattr(exc, "__notes__", []))
            print(f"FAIL {step.__name__}: {type(exc).__name__}: {exc}{notes}", file=sys.stderr, flush=True)
            sys.exit(1)
        print(f"ok {step.__name__}", flush=True)
    print("all ok", flush=True)


if __name__ == "__main__":
    main()
