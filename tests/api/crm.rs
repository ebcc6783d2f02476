//! The CRM through the gateway: contacts, bulk create, notes, assignments, boards, tags and
//! custom fields, as a client of the hosted API uses them. Each test runs twice: on
//! `switchboard dev` (SQLite) and on identity and CRM processes on PostgreSQL.

use serde_json::{Value, json};

use crate::common::{Api, Stack};

/// `name_on_sqlite` and `name_on_postgres` run the test `name` on both engines (the second
/// only when PostgreSQL is configured; CI requires it).
macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn on_sqlite() {
                    super::$name(crate::common::Stack::start().await).await;
                }

                #[tokio::test]
                async fn on_postgres() {
                    if let Some(stack) = crate::common::Stack::crm_on_postgres().await {
                        super::$name(stack).await;
                    }
                }
            }
        )*
    };
}

on_both_engines!(
    contacts_are_created_normalised_read_changed_and_deleted,
    contact_lists_search_filter_sort_and_page,
    bulk_create_fails_items_alone_repeats_create_nothing_and_has_its_own_rate,
    tags_boards_and_stages_move_contacts_and_their_deletion_takes_them_off,
    custom_fields_check_contact_values_and_notes_and_assignments_work,
    crm_data_is_the_teams_own_and_follows_keys_teamid_and_access,
);

fn id(body: &Value) -> String {
    body["data"]["id"].as_str().expect("an id").to_owned()
}

fn numbers(page: &Value) -> Vec<String> {
    page["data"].as_array().unwrap().iter().map(|c| c["number"].as_str().unwrap().to_owned()).collect()
}

fn details(body: &Value) -> Vec<(String, String)> {
    body["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["field"].as_str().unwrap().to_owned(), d["message"].as_str().unwrap().to_owned()))
        .collect()
}

async fn contacts_are_created_normalised_read_changed_and_deleted(stack: Stack) {
    let team = stack.team("Sales", false, 0).await;
    let api = stack.client(&team.key);

    let body = json!({
        "number": "+1 (415) 555-2671", "firstName": "Grace", "lastName": "Hopper",
        "email": "Grace@Navy.example", "carrier": "AT&T", "tagNames": ["VIP", "Lead"],
        "note": "Met at the conference",
    });
    let created = api.post("/contacts", body).await;
    let contact = created.expect(201)["data"].clone();
    assert_eq!(created.body["message"], "Contact created successfully");
    assert_eq!(contact["number"], "+14155552671");
    assert_eq!(contact["email"], "grace@navy.example");
    assert_eq!(contact["carrier"], "AT&T");
    assert_eq!(contact["customFields"], json!({}));
    assert_eq!(contact["crmStage"], Value::Null);
    let tags: Vec<&str> = contact["tags"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(tags, ["Lead", "VIP"], "tags by name");
    assert!(contact["tags"][0]["color"].as_str().unwrap().starts_with('#'));
    let contact_id = contact["id"].as_str().unwrap().to_owned();

    // A national spelling is read in the default region (US) and is the same number.
    let duplicate = api.post("/contacts", json!({ "number": "(415) 555-2671" })).await;
    assert_eq!(duplicate.error_code(409), "CONTACT_EXISTS");
    assert!(duplicate.text.contains(&contact_id), "the existing id is in details: {}", duplicate.text);

    let read = api.get(&format!("/contacts/{contact_id}")).await;
    assert_eq!(read.expect(200)["data"]["firstName"], "Grace");
    let notes = api.get(&format!("/contacts/{contact_id}/notes")).await;
    assert_eq!(notes.expect(200)["data"][0]["note"], "Met at the conference");
    assert_eq!(notes.body["data"][0]["type"], "general");
    assert_eq!(notes.body["data"][0]["createdBy"], "test");

    // PUT: members left out stay, null clears, tagNames replace the tags (the tag is reused
    // regardless of case).
    let changed = api
        .put(&format!("/contacts/{contact_id}"), json!({ "lastName": null, "carrier": "Verizon", "tagNames": ["vip"] }))
        .await;
    let changed = changed.expect(200)["data"].clone();
    assert_eq!((changed["firstName"].clone(), changed["lastName"].clone()), (json!("Grace"), Value::Null));
    assert_eq!(changed["carrier"], "Verizon");
    assert_eq!(changed["tags"].as_array().unwrap().len(), 1);
    assert_eq!(changed["tags"][0]["name"], "VIP");
    assert_eq!(api.get("/tags").await.expect(200)["data"].as_array().unwrap().len(), 2, "no tag was duplicated");

    let bad = api
        .post("/contacts", json!({ "number": "not a number", "email": "nope", "firstName": "", "tagIds": ["x"] }))
        .await;
    assert_eq!(bad.error_code(400), "VALIDATION_ERROR");
    let mut fields = bad.fields();
    fields.sort();
    assert_eq!(fields, ["email", "firstName", "tagIds[0]"]);
    let bad_number = api.post("/contacts", json!({ "number": "12" })).await;
    assert_eq!(bad_number.fields(), ["number"]);
    assert_eq!(api.post("/contacts", json!({})).await.fields(), ["number"]);
    assert_eq!(api.post("/contacts", json!({ "number": 415 })).await.fields(), ["number"]);
    let stranger_tag = api.post("/contacts", json!({ "number": "+442071838750", "tagIds": [uuid()] })).await;
    assert_eq!(stranger_tag.error_code(404), "NOT_FOUND");
    assert_eq!(api.get("/contacts").await.expect(200)["pagination"]["totalCount"], 1, "nothing half-written");

    let deleted = api.delete(&format!("/contacts/{contact_id}")).await;
    assert_eq!(deleted.expect(200)["data"]["id"], contact_id.as_str());
    assert_eq!(api.get(&format!("/contacts/{contact_id}")).await.error_code(404), "NOT_FOUND");
    assert_eq!(api.get(&format!("/contacts/{contact_id}/notes")).await.error_code(404), "NOT_FOUND");
    assert_eq!(api.get("/contacts/not-a-uuid").await.fields(), ["contactId"]);
}

fn uuid() -> String {
    "0190b1c6-1111-7000-8000-000000000001".to_owned()
}

async fn contact_lists_search_filter_sort_and_page(stack: Stack) {
    let team = stack.team("Lists", false, 0).await;
    let api = stack.client(&team.key);
    let vip = id(api.post("/tags", json!({ "name": "VIP", "color": "#10B981" })).await.expect(201));
    let lead = id(api.post("/tags", json!({ "name": "Lead" })).await.expect(201));
    let people = [
        ("+14155550101", Some("Grace"), Some("Hopper"), vec![vip.clone(), lead.clone()]),
        ("+14155550102", Some("Ada"), Some("Lovelace"), vec![vip.clone()]),
        ("+14155550103", Some("Alan"), Some("Turing"), vec![lead.clone()]),
        ("+14155550104", None, Some("Hamilton"), vec![]),
        ("+14155550105", Some("ada"), None, vec![vip.clone(), lead.clone()]),
    ];
    for (number, first, last, tags) in &people {
        let body = json!({ "number": number, "firstName": first, "lastName": last, "tagIds": tags });
        api.post("/contacts", body).await.expect(201);
    }

    let newest = api.get("/contacts").await;
    assert_eq!(newest.expect(200)["pagination"], json!({ "page": 1, "limit": 20, "totalCount": 5, "totalPages": 1 }));
    assert_eq!(numbers(&newest.body)[0], "+14155550105", "newest first by default");
    assert_eq!(newest.body["availableTags"].as_array().unwrap().len(), 2);
    assert_eq!(newest.body["availableTags"][1], json!({ "id": vip, "name": "VIP", "color": "#10B981" }));
    assert_eq!(newest.body["customFieldSchemas"], json!([]));

    // Search: a part of a name (any case), of the number's digits.
    let found = api.get("/contacts?search=gra").await;
    assert_eq!(numbers(found.expect(200)), ["+14155550101"]);
    assert_eq!(numbers(api.get("/contacts?search=5550103").await.expect(200)), ["+14155550103"]);
    assert_eq!(numbers(api.get("/contacts?search=555-0103").await.expect(200)), ["+14155550103"], "as typed");
    assert_eq!(numbers(api.get("/contacts?search=(415)%20555-0103").await.expect(200)), ["+14155550103"]);
    assert_eq!(api.get("/contacts?search=HAM").await.expect(200)["data"][0]["lastName"], "Hamilton");
    assert_eq!(api.get("/contacts?search=zzz").await.expect(200)["pagination"]["totalCount"], 0);

    // tagIds: every tag; sorted by first name with ties (Ada, ada) broken by id, no name last.
    let both = api.get(&format!("/contacts?tagIds={vip},{lead}&sortBy=firstName&sortOrder=asc")).await;
    assert_eq!(numbers(both.expect(200)), ["+14155550105", "+14155550101"], "ada before grace");
    let by_first = api.get("/contacts?sortBy=firstName&sortOrder=asc").await;
    let firsts: Vec<Value> =
        by_first.expect(200)["data"].as_array().unwrap().iter().map(|c| c["firstName"].clone()).collect();
    assert_eq!(firsts[2..], [json!("Alan"), json!("Grace"), Value::Null]);
    let by_first_desc = api.get("/contacts?sortBy=firstName&sortOrder=desc").await;
    let firsts: Vec<Value> =
        by_first_desc.expect(200)["data"].as_array().unwrap().iter().map(|c| c["firstName"].clone()).collect();
    assert_eq!((firsts[0].clone(), firsts[4].clone()), (json!("Grace"), Value::Null), "no first name last either way");
    let tagged = api.get(&format!("/contacts?tagIds={vip},{lead}")).await;
    let mut tagged = numbers(tagged.expect(200));
    tagged.sort();
    assert_eq!(tagged, ["+14155550101", "+14155550105"]);

    // Paging by number, 2 per page: every contact once.
    let mut seen = Vec::new();
    for page in 1..=3 {
        let listed = api.get(&format!("/contacts?sortBy=number&sortOrder=asc&limit=2&page={page}")).await;
        assert_eq!(listed.expect(200)["pagination"]["totalPages"], 3);
        seen.extend(numbers(&listed.body));
    }
    assert_eq!(seen, people.iter().map(|p| p.0.to_owned()).collect::<Vec<_>>());

    // number: the one contact with that number, however it is written; with other filters too.
    assert_eq!(numbers(api.get("/contacts?number=(415)%20555-0103").await.expect(200)), ["+14155550103"]);
    assert_eq!(numbers(api.get("/contacts?number=%2B1%20415%20555%200102").await.expect(200)), ["+14155550102"]);
    let with_tag = api.get(&format!("/contacts?number=4155550103&tagIds={vip}")).await;
    assert_eq!(with_tag.expect(200)["pagination"]["totalCount"], 0, "Alan is not a VIP");
    assert_eq!(api.get("/contacts?number=%2B14155550199").await.expect(200)["data"], json!([]));
    let other = stack.team("Lists Other", false, 0).await;
    let theirs = stack.client(&other.key).get("/contacts?number=%2B14155550103").await;
    assert_eq!(theirs.expect(200)["data"], json!([]), "another team's contact is never found");

    for bad in
        ["limit=0", "limit=101", "page=0", "sortBy=age", "sortOrder=up", "tagIds=nope", "boardId=1", "number=pizza"]
    {
        let refused = api.get(&format!("/contacts?{bad}")).await;
        let parameter = bad.split('=').next().unwrap();
        assert_eq!(refused.fields(), [parameter], "{bad}: {}", refused.text);
    }
}

async fn bulk_create_fails_items_alone_repeats_create_nothing_and_has_its_own_rate(stack: Stack) {
    let team = stack.team("Bulk", false, 0).await;
    let api = stack.client(&team.key);
    let contacts = json!({ "contacts": [
        { "number": "+14155550201", "firstName": "One" },
        { "number": "nonsense" },
        { "number": "+14155550203", "firstName": 7 },
        { "number": "(415) 555-0201" },
        { "number": "+14155550205", "tagNames": ["Imported"] },
        "not a contact",
        null,
    ]});
    let first = api.post("/contacts/bulk", contacts.clone()).await;
    let result = first.expect(200)["data"].clone();
    assert_eq!(result["created"].as_array().unwrap().len(), 2, "{}", first.text);
    let failed: Vec<(u64, &str)> = result["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["index"].as_u64().unwrap(), f["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        failed,
        [
            (1, "VALIDATION_ERROR"),
            (2, "VALIDATION_ERROR"),
            (3, "CONTACT_EXISTS"),
            (5, "VALIDATION_ERROR"),
            (6, "VALIDATION_ERROR")
        ]
    );
    assert_eq!(result["failed"][3]["details"][0]["message"], "must be an object");
    assert_eq!(result["failed"][0]["details"][0]["field"], "number");
    assert_eq!(result["failed"][1]["details"][0]["field"], "firstName");

    let again = api.post("/contacts/bulk", contacts).await;
    assert_eq!(again.expect(200)["data"]["created"], json!([]));
    let codes: Vec<&str> =
        again.body["data"]["failed"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap()).collect();
    assert_eq!(
        codes,
        [
            "CONTACT_EXISTS",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR",
            "CONTACT_EXISTS",
            "CONTACT_EXISTS",
            "VALIDATION_ERROR",
            "VALIDATION_ERROR"
        ]
    );
    assert_eq!(api.get("/contacts").await.expect(200)["pagination"]["totalCount"], 2);

    assert_eq!(api.post("/contacts/bulk", json!({ "contacts": [] })).await.fields(), ["contacts"]);
    let too_many: Vec<Value> = (0..1001).map(|n| json!({ "number": format!("+1415555{n:04}") })).collect();
    assert_eq!(api.post("/contacts/bulk", json!({ "contacts": too_many })).await.fields(), ["contacts"]);
    // Not a contact id: the literal route wins; other methods are 405.
    assert_eq!(api.get("/contacts/bulk").await.status, 405);
    // 1,000 valid items may weigh more than the 2 MiB that single writes get.
    let heavy: Vec<Value> =
        (0..1000).map(|n| json!({ "number": format!("+1628555{n:04}"), "note": "n".repeat(2500) })).collect();
    let heavy = api.post("/contacts/bulk", json!({ "contacts": heavy })).await;
    assert_eq!(heavy.expect(200)["data"]["created"].as_array().map(Vec::len), Some(1000));

    // The bulk class allows 10 a minute per team; 5 were spent above (the 400s count too,
    // the 405 does not): the 11th is refused.
    for _ in 0..5 {
        api.post("/contacts/bulk", json!({ "contacts": [{ "number": "+14155550299" }] })).await;
    }
    let limited = api.post("/contacts/bulk", json!({ "contacts": [{ "number": "+14155550298" }] })).await;
    assert_eq!(limited.error_code(429), "RATE_LIMITED");
    assert!(api.get("/contacts").await.status == 200, "other classes are not spent");
}

async fn tags_boards_and_stages_move_contacts_and_their_deletion_takes_them_off(stack: Stack) {
    let team = stack.team("Pipeline", false, 0).await;
    let api = stack.client(&team.key);

    let tag = api.post("/tags", json!({ "name": "Hot" })).await;
    assert_eq!(tag.expect(201)["data"]["color"], "#6B7280");
    let tag_id = id(&tag.body);
    let taken = api.post("/tags", json!({ "name": "HOT" })).await;
    assert_eq!(taken.status, 409, "names are unique regardless of case");
    assert_eq!(taken.fields(), ["name"], "the 409 names the field: {}", taken.text);
    assert_eq!(api.post("/tags", json!({ "name": "Cold", "color": "blue" })).await.fields(), ["color"]);
    let renamed = api.put(&format!("/tags/{tag_id}"), json!({ "color": "#FF0000" })).await;
    assert_eq!(renamed.expect(200)["data"], json!({ "id": tag_id, "name": "Hot", "color": "#FF0000" }));

    let board = api
        .post(
            "/boards",
            json!({ "name": "Sales", "stages": [{ "name": "New" }, { "name": "Won", "color": "#10B981" }] }),
        )
        .await;
    let board = board.expect(201)["data"].clone();
    let board_id = board["id"].as_str().unwrap().to_owned();
    let new_stage = board["stages"][0]["id"].as_str().unwrap().to_owned();
    let won_stage = board["stages"][1]["id"].as_str().unwrap().to_owned();
    assert_eq!(board["stages"][1]["position"], 1);
    assert_eq!(board["contactCount"], 0);
    assert_eq!(api.post("/boards", json!({ "name": "Empty", "stages": [] })).await.fields(), ["stages"]);

    let contact =
        api.post("/contacts", json!({ "number": "+14155550301", "tagIds": [tag_id], "boardIds": [board_id] })).await;
    let contact = contact.expect(201)["data"].clone();
    let contact_id = contact["id"].as_str().unwrap().to_owned();
    assert_eq!(contact["crmStage"]["id"], new_stage.as_str(), "a new contact sits in the first stage");
    assert_eq!(contact["crmStage"]["name"], "New");

    let moved = api.put(&format!("/contacts/{contact_id}"), json!({ "crmStageId": won_stage })).await;
    assert_eq!(moved.expect(200)["data"]["crmStage"]["name"], "Won");
    let in_won = api.get(&format!("/contacts?stageId={won_stage}")).await;
    assert_eq!(in_won.expect(200)["pagination"]["totalCount"], 1);
    assert_eq!(api.get(&format!("/contacts?boardId={board_id}")).await.expect(200)["pagination"]["totalCount"], 1);
    assert_eq!(api.get("/boards").await.expect(200)["data"][0]["contactCount"], 1);
    let unknown_stage = api.put(&format!("/contacts/{contact_id}"), json!({ "crmStageId": uuid() })).await;
    assert_eq!(unknown_stage.error_code(404), "NOT_FOUND");

    // A stage that holds contacts cannot be removed; a kept one keeps its id.
    let without_won = json!({ "stages": [{ "id": new_stage, "name": "Fresh" }] });
    assert_eq!(api.put(&format!("/boards/{board_id}"), without_won).await.status, 409);
    let reordered = api
        .put(
            &format!("/boards/{board_id}"),
            json!({ "name": "Deals", "stages": [{ "id": won_stage, "name": "Won" }, { "name": "Lost" }] }),
        )
        .await;
    let reordered = reordered.expect(200)["data"].clone();
    assert_eq!(reordered["name"], "Deals");
    assert_eq!(reordered["stages"][0]["id"], won_stage.as_str());
    assert_eq!(reordered["stages"].as_array().unwrap().len(), 2, "New (empty) was removed");

    // Boards of a contact: replace with none takes it off.
    let off = api.put(&format!("/contacts/{contact_id}/boards"), json!({ "boardIds": [] })).await;
    assert_eq!(off.expect(200)["data"]["crmStage"], Value::Null);
    let on = api.post(&format!("/contacts/{contact_id}/boards"), json!({ "boardIds": [board_id] })).await;
    assert_eq!(on.expect(200)["data"]["crmStage"]["id"], won_stage.as_str(), "back in the (new) first stage");

    // Deleting a tag takes it off its contacts; deleting a board takes its contacts off it.
    api.delete(&format!("/tags/{tag_id}")).await.expect(200);
    assert_eq!(api.get(&format!("/contacts/{contact_id}")).await.expect(200)["data"]["tags"], json!([]));
    assert_eq!(api.put(&format!("/tags/{tag_id}"), json!({ "name": "x" })).await.error_code(404), "NOT_FOUND");
    api.delete(&format!("/boards/{board_id}")).await.expect(200);
    assert_eq!(api.get(&format!("/contacts/{contact_id}")).await.expect(200)["data"]["crmStage"], Value::Null);
    assert_eq!(api.get(&format!("/boards/{board_id}")).await.error_code(404), "NOT_FOUND");
}

async fn custom_fields_check_contact_values_and_notes_and_assignments_work(stack: Stack) {
    let team = stack.team("Fields", false, 0).await;
    let api = stack.client(&team.key);
    stack
        .admin(&[
            "create-user",
            "--team",
            &team.id,
            "--first-name",
            "Ann",
            "--last-name",
            "A",
            "--email",
            "ann@a.example",
        ])
        .await;
    let user_id = api.get("/users").await.expect(200)["data"][0]["id"].as_str().unwrap().to_owned();

    let plan = api
        .post(
            "/contacts/custom-fields",
            json!({ "name": "plan", "label": "Plan", "type": "select", "options": ["free", "pro"], "required": true }),
        )
        .await;
    let plan_id = id(plan.expect(201));
    api.post("/contacts/custom-fields", json!({ "name": "seats", "label": "Seats", "type": "number" }))
        .await
        .expect(201);
    assert_eq!(
        api.post("/contacts/custom-fields", json!({ "name": "x", "label": "X", "type": "text", "options": ["a"] }))
            .await
            .status,
        400
    );
    assert_eq!(
        api.post("/contacts/custom-fields", json!({ "name": "9lives", "label": "X", "type": "text" })).await.fields(),
        ["name"]
    );
    let fields = api.get("/contacts/custom-fields").await;
    assert_eq!(fields.expect(200)["data"][0]["options"], json!(["free", "pro"]));

    let missing = api.post("/contacts", json!({ "number": "+14155550401" })).await;
    assert_eq!(details(&missing.body).iter().map(|d| d.0.as_str()).collect::<Vec<_>>(), ["customFields.plan"]);
    let wrong = api
        .post(
            "/contacts",
            json!({ "number": "+14155550401", "customFields": { "plan": "gold", "seats": "many", "age": 3 } }),
        )
        .await;
    let mut wrong_fields: Vec<String> = details(&wrong.body).into_iter().map(|d| d.0).collect();
    wrong_fields.sort();
    assert_eq!(wrong_fields, ["customFields.age", "customFields.plan", "customFields.seats"]);
    let good = api
        .post(
            "/contacts",
            json!({ "number": "+14155550401", "customFields": { "plan": "pro", "seats": 5 }, "assignUserIds": [user_id] }),
        )
        .await;
    let contact_id = id(good.expect(201));
    assert_eq!(good.body["data"]["customFields"], json!({ "plan": "pro", "seats": 5 }));
    let listed = api.get("/contacts").await;
    assert_eq!(listed.expect(200)["customFieldSchemas"][0]["name"], "plan");
    assert_eq!(listed.body["customFieldSchemas"][0]["required"], true);

    // Notes: newest first, types checked, deletable.
    let notes = format!("/contacts/{contact_id}/notes");
    api.post(&notes, json!({ "note": "First call" })).await.expect(201);
    let warning = api.post(&notes, json!({ "note": "Pays late", "type": "warning" })).await;
    let warning_id = id(warning.expect(201));
    assert_eq!(api.post(&notes, json!({ "note": "x", "type": "urgent" })).await.fields(), ["type"]);
    assert_eq!(api.post(&notes, json!({ "note": "" })).await.fields(), ["note"]);
    let listed = api.get(&notes).await;
    assert_eq!(listed.expect(200)["data"][0]["note"], "Pays late");
    assert_eq!(listed.body["data"][1]["note"], "First call");
    api.delete(&format!("{notes}/{warning_id}")).await.expect(200);
    assert_eq!(api.delete(&format!("{notes}/{warning_id}")).await.error_code(404), "NOT_FOUND");

    // Assignments are users of the team.
    let assignments = format!("/contacts/{contact_id}/assignments");
    assert_eq!(api.get(&assignments).await.expect(200)["data"][0]["email"], "ann@a.example");
    let stranger = api.post(&assignments, json!({ "userIds": [uuid()] })).await;
    assert_eq!(stranger.fields(), ["userIds[0]"]);
    assert!(stranger.text.contains(&uuid()));
    assert_eq!(api.put(&assignments, json!({ "userIds": [] })).await.expect(200)["data"], json!([]));
    assert_eq!(
        api.get(&format!("/contacts?assignedUserId={user_id}")).await.expect(200)["pagination"]["totalCount"],
        0
    );

    // Deleting a field removes its values.
    api.delete(&format!("/contacts/custom-fields/{plan_id}")).await.expect(200);
    assert_eq!(
        api.get(&format!("/contacts/{contact_id}")).await.expect(200)["data"]["customFields"],
        json!({ "seats": 5 })
    );
}

async fn crm_data_is_the_teams_own_and_follows_keys_teamid_and_access(stack: Stack) {
    let agency = stack.team("Agency", true, 1000).await;
    let other = stack.team("Other", false, 0).await;
    let api = stack.client(&agency.key);
    let tag = id(api.post("/tags", json!({ "name": "Mine" })).await.expect(201));
    let board = api.post("/boards", json!({ "name": "B", "stages": [{ "name": "S" }] })).await;
    let board_id = id(board.expect(201));
    let field =
        id(api.post("/contacts/custom-fields", json!({ "name": "f", "label": "F", "type": "text" })).await.expect(201));
    let contact = id(api.post("/contacts", json!({ "number": "+14155550501", "note": "n" })).await.expect(201));
    let note =
        api.get(&format!("/contacts/{contact}/notes")).await.expect(200)["data"][0]["id"].as_str().unwrap().to_owned();

    let stranger = stack.client(&other.key);
    for path in [
        format!("/contacts/{contact}"),
        format!("/contacts/{contact}/notes"),
        format!("/contacts/{contact}/assignments"),
        format!("/boards/{board_id}"),
    ] {
        assert_eq!(stranger.get(&path).await.error_code(404), "NOT_FOUND", "{path}");
    }
    assert_eq!(stranger.delete(&format!("/contacts/{contact}/notes/{note}")).await.status, 404);
    assert_eq!(stranger.put(&format!("/tags/{tag}"), json!({ "name": "Theirs" })).await.status, 404);
    assert_eq!(stranger.delete(&format!("/contacts/custom-fields/{field}")).await.status, 404);
    assert_eq!(stranger.post("/contacts", json!({ "number": "+14155550502", "tagIds": [tag] })).await.status, 404);
    assert_eq!(stranger.get("/contacts").await.expect(200)["pagination"]["totalCount"], 0);
    assert_eq!(stranger.get("/tags").await.expect(200)["data"], json!([]));
    assert_eq!(stranger.get("/boards").await.expect(200)["data"], json!([]));
    // The same number is another team's own contact.
    stranger.post("/contacts", json!({ "number": "+14155550501" })).await.expect(201);

    // Read-only keys read; writes are 403.
    let reader = stack.client(&stack.key(&agency.id, true).await);
    assert_eq!(reader.get("/contacts").await.status, 200);
    assert_eq!(reader.post("/contacts", json!({ "number": "+14155550503" })).await.error_code(403), "FORBIDDEN");

    // A subteam without the crm flag: its own keys are refused, the agency acts on it.
    let body = json!({
        "firstName": "Ada", "lastName": "Lovelace", "teamName": "Client", "email": "ada@client.example",
        "totalMonthlyCredits": 0, "accessConfig": { "crm": false },
    });
    let subteam = api.post("/agency/subteams", body).await;
    let subteam_id = id(subteam.expect(201));
    assert_eq!(subteam.body["data"]["accessConfig"]["crm"], false);
    let own = stack.client(&stack.key(&subteam_id, false).await);
    assert_eq!(own.get("/contacts").await.error_code(403), "FORBIDDEN");
    let scoped = api.post(&format!("/contacts?teamId={subteam_id}"), json!({ "number": "+14155550504" })).await;
    scoped.expect(201);
    let theirs = api.get(&format!("/contacts?teamId={subteam_id}")).await;
    assert_eq!(numbers(theirs.expect(200)), ["+14155550504"]);
    assert_eq!(api.get("/contacts").await.expect(200)["pagination"]["totalCount"], 1, "the agency's own are apart");
}

/// The MCP tools of the CRM run through the same routes.
#[tokio::test]
async fn crm_tools_are_listed_with_their_hints() {
    let stack = Stack::start().await;
    let team = stack.team("Tools", false, 0).await;
    let api: Api = stack.client(&team.key);
    api.post("/contacts", json!({ "number": "+14155550601", "firstName": "Grace" })).await.expect(201);
    let spec = api.get("/openapi.json").await;
    let paths = spec.expect(200)["paths"].as_object().unwrap().clone();
    for path in
        ["/contacts", "/contacts/bulk", "/contacts/custom-fields", "/boards", "/tags", "/contacts/{contactId}/notes"]
    {
        assert!(paths.contains_key(path), "{path} is described");
    }
    let skill = api.get("/skill.md").await;
    assert!(skill.text.contains("/contacts/bulk"), "the skill file lists the CRM");
}
