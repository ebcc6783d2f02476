//! The identity store's behaviour, on SQLite and on PostgreSQL (when `TEST_DATABASE_URL` is
//! set): every test runs once per engine on a fresh database.

#![allow(clippy::unwrap_used)]

use std::future::Future;

use switchboard_identity::IdentityStore;
use switchboard_identity::store::accounts::SessionTimes;
use switchboard_identity::store::{Debit, NewSubteam, NewTeam};
use switchboard_kit::ErrorKind;
use switchboard_kit::apikey::hash_key;
use switchboard_kit::testdb;
use switchboard_proto::v1::{AccessConfig, Client, KeyAccess, NewUser, PageRequest, User};

const TIMES: SessionTimes = SessionTimes { idle_ms: 3_600_000, max_ms: 86_400_000, reauth_ms: 300_000 };

async fn on_every_engine<F, Fut>(test: F)
where
    F: Fn(IdentityStore) -> Fut,
    Fut: Future<Output = ()>,
{
    for database in testdb::all().await.expect("test databases") {
        let store = IdentityStore::open(&database.url).await.expect("open store");
        eprintln!("engine: {:?}", database.engine);
        test(store.clone()).await;
        store.db().close().await;
    }
}

async fn team(store: &IdentityStore, name: &str, agency: bool, credits: i64) -> String {
    store
        .create_team(NewTeam { name: name.into(), owns_agency: agency, initial_credits: credits, ..NewTeam::default() })
        .await
        .expect("create team")
        .id
}

fn user(email: &str) -> NewUser {
    NewUser { first_name: "Ada".into(), last_name: "Lovelace".into(), email: email.into(), role: String::new() }
}

fn subteam(agency: &str, name: &str, credits: i64) -> NewSubteam {
    NewSubteam {
        agency_team_id: agency.into(),
        team_name: name.into(),
        user: user("owner@client.example"),
        total_monthly_credits: credits,
        access: None,
        invite_valid_ms: 7 * 24 * 3_600_000,
    }
}

#[tokio::test]
async fn a_new_team_has_its_balance_and_an_active_subscription() {
    on_every_engine(|store| async move {
        let id = team(&store, "Acme", false, 250).await;
        let identity = store.identity(&id).await.unwrap();
        assert_eq!(identity.team.unwrap().name, "Acme");
        assert_eq!(identity.credit_balance, 250);
        let subscription = identity.subscription.unwrap();
        assert_eq!(subscription.status, "active");
        assert!(subscription.current_period_end_ms.unwrap() > switchboard_kit::time::now_ms());
        assert!(identity.agency_team.is_none());
        let ledger = store.ledger(&id, 10).await.unwrap();
        assert_eq!(ledger.len(), 1);
        assert_eq!((ledger[0].kind.as_str(), ledger[0].delta), ("grant", 250));
    })
    .await;
}

#[tokio::test]
async fn identities_of_several_teams_are_read_at_once_leaving_out_unknown_ones() {
    on_every_engine(|store| async move {
        let agency = team(&store, "Agency", true, 5_000).await;
        let client = store.create_subteam(subteam(&agency, "Client", 300)).await.unwrap().team.unwrap().id;
        let plain = team(&store, "Plain", false, 70).await;
        let gone = team(&store, "Gone", false, 1).await;
        store.delete_team(&gone).await.unwrap();
        let asked = [&plain, &client, &gone, "not-a-uuid", "7d3c1d9e-0000-4000-8000-000000000000", &agency]
            .map(ToString::to_string);
        let mut read: Vec<(String, i64, Option<String>)> = store
            .identities(&asked)
            .await
            .unwrap()
            .into_iter()
            .map(|identity| {
                let name = identity.team.unwrap().name;
                (name, identity.credit_balance, identity.agency_team.map(|agency| agency.name))
            })
            .collect();
        read.sort();
        assert_eq!(
            read,
            [
                ("Agency".to_owned(), 4_700, None),
                ("Client".to_owned(), 300, Some("Agency".to_owned())),
                ("Plain".to_owned(), 70, None)
            ],
            "each existing team once, the same as read alone"
        );
        assert!(store.identities(&[]).await.unwrap().is_empty());
    })
    .await;
}

#[tokio::test]
async fn keys_are_found_by_hash_listed_without_secret_and_revoked_for_good() {
    on_every_engine(|store| async move {
        let id = team(&store, "Acme", false, 0).await;
        let created = store.create_key(&id, "ci", KeyAccess::ReadOnly).await.unwrap();
        let key = created.key.unwrap();
        assert!(created.secret.starts_with("ew_"));
        assert!(created.secret.starts_with(&key.prefix));

        let (found, owner) = store.authenticate(&hash_key(&created.secret)).await.unwrap();
        assert_eq!(found.id, key.id);
        assert_eq!(found.access(), KeyAccess::ReadOnly);
        assert_eq!(owner.id, id);
        assert!(found.last_used_at_ms.is_some());

        let listed = store.list_keys(&id).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].last_used_at_ms.is_some());

        let revoked = store.revoke_key(&key.id, Some(&id)).await.unwrap();
        assert!(revoked.revoked_at_ms.is_some());
        let error = store.authenticate(&hash_key(&created.secret)).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::Unauthorized);
        let unknown = store.authenticate(&hash_key("ew_unknown")).await.unwrap_err();
        assert_eq!(unknown.kind, ErrorKind::Unauthorized);
    })
    .await;
}

#[tokio::test]
async fn a_key_of_another_team_cannot_be_revoked_through_this_team() {
    on_every_engine(|store| async move {
        let mine = team(&store, "Mine", false, 0).await;
        let theirs = team(&store, "Theirs", false, 0).await;
        let key = store.create_key(&theirs, "k", KeyAccess::Full).await.unwrap().key.unwrap();
        let error = store.revoke_key(&key.id, Some(&mine)).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::NotFound);
        assert!(store.list_keys(&mine).await.unwrap().is_empty());
        assert!(store.list_keys(&theirs).await.unwrap()[0].revoked_at_ms.is_none());
    })
    .await;
}

#[tokio::test]
async fn concurrent_debits_never_drive_a_balance_below_zero() {
    on_every_engine(|store| async move {
        let id = team(&store, "Busy", false, 20).await;
        let debits = (0..50).map(|_| {
            let store = store.clone();
            let id = id.clone();
            tokio::spawn(async move { store.debit(&id, 1, "search").await })
        });
        let mut succeeded = 0;
        for debit in debits {
            match debit.await.unwrap() {
                Ok(entry) => {
                    assert!(entry.balance_after >= 0);
                    succeeded += 1;
                }
                Err(error) => assert_eq!(error.kind, ErrorKind::InsufficientCredits),
            }
        }
        assert_eq!(succeeded, 20);
        assert_eq!(store.balance(&id).await.unwrap(), 0);
        let ledger = store.ledger(&id, 100).await.unwrap();
        assert_eq!(ledger.iter().filter(|e| e.kind == "debit").count(), 20);
        assert_eq!(ledger.iter().map(|e| e.delta).sum::<i64>(), 0);
    })
    .await;
}

async fn outbox_events(store: &IdentityStore) -> i64 {
    use sqlx::Row;
    sqlx::query("SELECT COUNT(*) AS n FROM event_outbox").fetch_one(store.db().pool()).await.unwrap().get("n")
}

fn call_debit(amount: i64, reference: &str) -> Debit<'_> {
    Debit { amount, reason: "call", reference_id: Some(reference), up_to_balance: true }
}

#[tokio::test]
async fn a_referenced_debit_is_taken_once_even_concurrently() {
    on_every_engine(|store| async move {
        let id = team(&store, "Calls", false, 100).await;
        let debits = (0..10).map(|_| {
            let store = store.clone();
            let id = id.clone();
            tokio::spawn(async move { store.debit_with(&id, call_debit(30, "call:one")).await })
        });
        let mut entries = Vec::new();
        for debit in debits {
            entries.push(debit.await.unwrap().unwrap());
        }
        assert!(entries.iter().all(|entry| entry.id == entries[0].id && entry.delta == -30));
        assert_eq!(entries[0].reference_id.as_deref(), Some("call:one"));
        assert_eq!(store.balance(&id).await.unwrap(), 70);
        // Another team may use the same reference: references are per team.
        let other = team(&store, "Other", false, 10).await;
        assert_eq!(store.debit_with(&other, call_debit(4, "call:one")).await.unwrap().balance_after, 6);
    })
    .await;
}

#[tokio::test]
async fn a_debit_up_to_the_balance_empties_it_and_keeps_its_reference() {
    on_every_engine(|store| async move {
        let id = team(&store, "Short", false, 25).await;
        let partial = store.debit_with(&id, call_debit(40, "call:a")).await.unwrap();
        assert_eq!((partial.delta, partial.balance_after), (-25, 0));
        let nothing = store.debit_with(&id, call_debit(5, "call:b")).await.unwrap();
        assert_eq!((nothing.delta, nothing.balance_after), (0, 0));
        store.grant(&id, 50, "top-up").await.unwrap();
        // Retries after a top-up take nothing more: the reference answers the first entry.
        assert_eq!(store.debit_with(&id, call_debit(5, "call:b")).await.unwrap().id, nothing.id);
        assert_eq!(store.balance(&id).await.unwrap(), 50);
        // Without up_to_balance a short balance still refuses, and a bad reference is named.
        let strict = Debit { up_to_balance: false, ..call_debit(60, "call:c") };
        assert_eq!(store.debit_with(&id, strict).await.unwrap_err().kind, ErrorKind::InsufficientCredits);
        let error = store.debit_with(&id, call_debit(1, "")).await.unwrap_err();
        assert_eq!(error.details[0].field, "referenceId");
    })
    .await;
}

#[tokio::test]
async fn a_call_debit_tells_credits_low_once_like_a_search() {
    on_every_engine(|store| async move {
        let id = team(&store, "Alerted", false, 100).await;
        store.set_credits_alert(&id, Some(50)).await.unwrap();
        let before = outbox_events(&store).await;
        store.debit_with(&id, call_debit(60, "call:x")).await.unwrap();
        assert_eq!(outbox_events(&store).await, before + 1);
        store.debit_with(&id, call_debit(60, "call:x")).await.unwrap();
        store.debit_with(&id, call_debit(10, "call:y")).await.unwrap();
        assert_eq!(outbox_events(&store).await, before + 1, "a retry and a debit under the threshold tell nobody");
        // Call debits are credits used, not searches.
        let days = store.usage(&id, 0, i64::MAX / 2).await.unwrap();
        assert_eq!((days[0].searches, days[0].credits_used), (0, 70));
    })
    .await;
}

#[tokio::test]
async fn a_debit_is_refunded_once() {
    on_every_engine(|store| async move {
        let id = team(&store, "Acme", false, 5).await;
        let debit = store.debit(&id, 2, "search").await.unwrap();
        assert_eq!(debit.balance_after, 3);
        let refund = store.refund(&debit.id, &id, "search failed").await.unwrap();
        assert_eq!(refund.balance_after, 5);
        let again = store.refund(&debit.id, &id, "search failed").await.unwrap_err();
        assert_eq!(again.kind, ErrorKind::Conflict);
        assert_eq!(store.balance(&id).await.unwrap(), 5);

        let other = team(&store, "Other", false, 0).await;
        let foreign = store.refund(&debit.id, &other, "x").await.unwrap_err();
        assert_eq!(foreign.kind, ErrorKind::NotFound);
    })
    .await;
}

#[tokio::test]
async fn a_subteam_takes_its_credits_from_the_agency_all_or_nothing() {
    on_every_engine(|store| async move {
        let agency = team(&store, "Agency", true, 1000).await;
        let created = store.create_subteam(subteam(&agency, "Client", 300)).await.unwrap();
        let client = created.team.unwrap();
        assert_eq!(client.parent_team_id.as_deref(), Some(agency.as_str()));
        assert_eq!(created.credit_balance, 300);
        assert_eq!(created.users[0].role, "owner");
        assert_eq!(store.balance(&agency).await.unwrap(), 700);
        let identity = store.identity(&client.id).await.unwrap();
        assert_eq!(identity.agency_team.unwrap().id, agency);

        let teams_before = store.count_teams().await.unwrap();
        let error = store.create_subteam(subteam(&agency, "Too big", 701)).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::InsufficientCredits);
        assert_eq!(store.count_teams().await.unwrap(), teams_before);
        assert_eq!(store.balance(&agency).await.unwrap(), 700);
    })
    .await;
}

#[tokio::test]
async fn only_agencies_create_subteams() {
    on_every_engine(|store| async move {
        let plain = team(&store, "Plain", false, 1000).await;
        let error = store.create_subteam(subteam(&plain, "Client", 10)).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::Forbidden);
        let invalid = store
            .create_subteam(NewSubteam { user: user("not-an-email"), ..subteam(&plain, "", 10) })
            .await
            .unwrap_err();
        assert_eq!(invalid.kind, ErrorKind::Validation);
        let fields: Vec<_> = invalid.details.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["teamName", "email"]);
    })
    .await;
}

#[tokio::test]
async fn subteams_resolve_only_for_their_own_agency() {
    on_every_engine(|store| async move {
        let agency = team(&store, "Agency", true, 100).await;
        let rival = team(&store, "Rival", true, 100).await;
        let plain = team(&store, "Plain", false, 0).await;
        let client = store.create_subteam(subteam(&agency, "Client", 10)).await.unwrap().team.unwrap();

        assert_eq!(store.resolve_subteam(&agency, &client.id).await.unwrap().id, client.id);
        assert_eq!(store.resolve_subteam(&rival, &client.id).await.unwrap_err().kind, ErrorKind::Forbidden);
        assert_eq!(store.resolve_subteam(&plain, &client.id).await.unwrap_err().kind, ErrorKind::Forbidden);
        let unknown = uuid::Uuid::new_v4().to_string();
        assert_eq!(store.resolve_subteam(&agency, &unknown).await.unwrap_err().kind, ErrorKind::Forbidden);

        store.delete_team(&client.id).await.unwrap();
        assert_eq!(store.resolve_subteam(&agency, &client.id).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(store.identity(&client.id).await.unwrap_err().kind, ErrorKind::NotFound);
    })
    .await;
}

#[tokio::test]
async fn subteam_lists_are_paginated_sorted_and_private() {
    on_every_engine(|store| async move {
        let agency = team(&store, "Agency", true, 1000).await;
        let rival = team(&store, "Rival", true, 1000).await;
        for name in ["Charlie", "Alpha", "Bravo"] {
            store.create_subteam(subteam(&agency, name, 1)).await.unwrap();
        }
        store.create_subteam(subteam(&rival, "Secret", 1)).await.unwrap();

        let by_name = PageRequest { page: 1, limit: 2, sort_by: "name".into(), ascending: true };
        let (first, page) = store.list_subteams(&agency, &by_name).await.unwrap();
        let names: Vec<_> = first.iter().map(|s| s.team.as_ref().unwrap().name.as_str()).collect();
        assert_eq!(names, ["Alpha", "Bravo"]);
        assert_eq!((page.total_count, page.total_pages), (3, 2));
        assert_eq!(first[0].users.len(), 1);

        let (second, _) = store.list_subteams(&agency, &PageRequest { page: 2, ..by_name }).await.unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].team.as_ref().unwrap().name, "Charlie");

        let (rivals, _) =
            store.list_subteams(&rival, &PageRequest { page: 1, limit: 20, ..Default::default() }).await.unwrap();
        assert_eq!(rivals.len(), 1);
    })
    .await;
}

#[tokio::test]
async fn access_flags_are_stored_as_given() {
    on_every_engine(|store| async move {
        let agency = team(&store, "Agency", true, 100).await;
        let access = AccessConfig { knowledge_base: false, instructions_write: false, ..full() };
        let created =
            store.create_subteam(NewSubteam { access: Some(access), ..subteam(&agency, "Client", 0) }).await.unwrap();
        let stored = store.team(&created.team.unwrap().id).await.unwrap().access.unwrap();
        assert_eq!(stored, access);
    })
    .await;
}

#[tokio::test]
async fn transfers_go_only_from_an_agency_to_its_subteams() {
    on_every_engine(|store| async move {
        let agency = team(&store, "Agency", true, 100).await;
        let rival = team(&store, "Rival", true, 100).await;
        let client = store.create_subteam(subteam(&agency, "Client", 0)).await.unwrap().team.unwrap();
        let moved = store.transfer(&agency, &client.id, 40, "top-up").await.unwrap();
        assert_eq!(moved.debit.unwrap().balance_after, 60);
        assert_eq!(moved.credit.unwrap().balance_after, 40);
        assert_eq!(store.transfer(&rival, &client.id, 1, "x").await.unwrap_err().kind, ErrorKind::Forbidden);
        assert_eq!(
            store.transfer(&agency, &client.id, 61, "x").await.unwrap_err().kind,
            ErrorKind::InsufficientCredits
        );
        assert_eq!(store.balance(&client.id).await.unwrap(), 40);
    })
    .await;
}

#[tokio::test]
async fn users_are_unique_per_team_by_email() {
    on_every_engine(|store| async move {
        let id = team(&store, "Acme", false, 0).await;
        store.create_user(&id, &user("ada@example.com")).await.unwrap();
        let error = store.create_user(&id, &user("ADA@example.com")).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::Conflict);
        let other = team(&store, "Other", false, 0).await;
        store.create_user(&other, &user("ada@example.com")).await.unwrap();
        assert_eq!(store.list_users(&id).await.unwrap().len(), 1);
    })
    .await;
}

fn full() -> AccessConfig {
    AccessConfig {
        users: true,
        instructions: true,
        instructions_write: true,
        testing: true,
        knowledge_base: true,
        agent_configuration: true,
        agent_creation: true,
        conversations: true,
        crm: true,
    }
}

/// Two replicas polling at once: each due period is topped up by exactly one of them, to the
/// allowance, and an agency short of credits gives what it has.
#[tokio::test]
async fn a_due_period_is_topped_up_once_to_the_allowance() {
    on_every_engine(|store| async move {
        let store = store.with_billing_period(1_000);
        let agency = team(&store, "Agency", true, 100).await;
        let client = store.create_subteam(subteam(&agency, "Client", 10)).await.unwrap();
        let client = client.team.unwrap().id;
        let change =
            switchboard_identity::store::SubteamChange { total_monthly_credits: Some(40), ..Default::default() };
        store.update_subteam(&agency, &client, change).await.unwrap();
        assert_eq!(store.balance(&client).await.unwrap(), 10, "a new allowance waits for the next period");

        tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
        let (one, two) = tokio::join!(store.top_up_due(), store.top_up_due());
        let done: Vec<_> = one.unwrap().into_iter().chain(two.unwrap()).collect();
        assert_eq!(done.len(), 1, "{done:?}");
        assert_eq!((done[0].moved, done[0].short), (30, 0));
        assert_eq!(store.balance(&client).await.unwrap(), 40);
        assert_eq!(store.balance(&agency).await.unwrap(), 60);
        assert!(store.top_up_due().await.unwrap().is_empty(), "nothing due until the next period ends");

        // Short: the agency gives what it has.
        let change =
            switchboard_identity::store::SubteamChange { total_monthly_credits: Some(500), ..Default::default() };
        store.update_subteam(&agency, &client, change).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
        let done = store.top_up_due().await.unwrap();
        assert_eq!((done[0].moved, done[0].short), (60, 400), "{done:?}");
        assert_eq!((store.balance(&agency).await.unwrap(), store.balance(&client).await.unwrap()), (0, 100));

        // Deleted subteams are not topped up; other agencies' subteams are not found.
        let other = team(&store, "Other", true, 10).await;
        assert_eq!(store.subteam(&other, &client).await.unwrap_err().kind, ErrorKind::NotFound);
        store.delete_subteam(&agency, &client).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
        assert!(store.top_up_due().await.unwrap().is_empty());
        assert_eq!(store.subteam(&agency, &client).await.unwrap_err().kind, ErrorKind::NotFound);
    })
    .await;
}

#[tokio::test]
async fn usage_counts_searches_and_credits_per_day_less_refunds() {
    on_every_engine(|store| async move {
        let id = team(&store, "Usage", false, 10).await;
        store.debit(&id, 1, "search").await.unwrap();
        let failed = store.debit(&id, 2, "search").await.unwrap();
        store.refund(&failed.id, &id, "search failed").await.unwrap();
        store.debit(&id, 3, "search").await.unwrap();
        let other = team(&store, "Other", false, 10).await;
        store.debit(&other, 1, "search").await.unwrap();

        let now = switchboard_kit::time::now_ms();
        let today = now - now.rem_euclid(86_400_000);
        let days = store.usage(&id, today, today + 86_400_000).await.unwrap();
        assert_eq!(days.len(), 1, "{days:?}");
        assert_eq!((days[0].day_ms, days[0].searches, days[0].credits_used), (today, 2, 4));
        assert!(store.usage(&id, today - 86_400_000, today).await.unwrap().is_empty());
    })
    .await;
}

/// A confirmation link for `user` to move to `email`, valid `valid_ms` (the token, or `None`
/// when the address is someone else's).
async fn email_link(store: &IdentityStore, user: &User, email: &str, valid_ms: i64) -> Option<String> {
    let email_key = switchboard_identity::store::profile::new_address(user, email).unwrap();
    let expires_at = switchboard_kit::time::now_ms() + valid_ms;
    store.begin_email_change(user, &email_key, expires_at).await.unwrap()
}

/// Issue 40: an e-mail confirmation link expires, works once, and only the newest one of a
/// person works. Issue 53: an address someone else uses gets no link.
#[tokio::test]
async fn email_change_links_expire_work_once_and_the_newest_wins() {
    on_every_engine(|store| async move {
        let id = team(&store, "Mailers", false, 0).await;
        let ada = store.create_user(&id, &user("ada@mailers.example")).await.unwrap();

        let expired = email_link(&store, &ada, "old-link@mailers.example", -1).await.unwrap();
        let error = store.confirm_email_change(&expired).await.err().expect("an expired link");
        assert_eq!(error.kind, ErrorKind::NotFound);

        let first = email_link(&store, &ada, "first@mailers.example", 60_000).await.unwrap();
        let second = email_link(&store, &ada, "Second@Mailers.example", 60_000).await.unwrap();
        let error = store.confirm_email_change(&first).await.err().expect("an older link");
        assert_eq!(error.kind, ErrorKind::NotFound);
        let changed = store.confirm_email_change(&second).await.unwrap();
        assert_eq!(
            (changed.old_email.as_str(), changed.user.email.as_str()),
            ("ada@mailers.example", "second@mailers.example")
        );
        let error = store.confirm_email_change(&second).await.err().expect("a used link");
        assert_eq!(error.kind, ErrorKind::NotFound);

        // A teammate's address gets no link; one taken since the link was made is refused at
        // the confirmation.
        let bob = store.create_user(&id, &user("bob@mailers.example")).await.unwrap();
        assert!(email_link(&store, &bob, "SECOND@mailers.example", 60_000).await.is_none(), "taken");
        let late = email_link(&store, &bob, "late@mailers.example", 60_000).await.unwrap();
        email_link(&store, &changed.user, "late@mailers.example", 60_000).await.unwrap();
        let mine = email_link(&store, &changed.user, "late@mailers.example", 60_000).await.unwrap();
        store.confirm_email_change(&mine).await.unwrap();
        let error = store.confirm_email_change(&late).await.err().expect("taken since");
        assert_eq!(error.kind, ErrorKind::Conflict);
    })
    .await;
}

/// Issue 53, finding 4: a reset link ends when a newer one is made, when the password is set
/// (by a reset or a change, which also end e-mail changes under way), and when the address
/// changes.
#[tokio::test]
async fn reset_links_end_with_a_newer_link_a_new_password_and_a_new_address() {
    on_every_engine(|store| async move {
        let id = team(&store, "Resets", false, 0).await;
        let ada = store.create_user(&id, &user("ada@resets.example")).await.unwrap();
        let day = 86_400_000;
        let gone = |error: switchboard_kit::ServiceError| assert_eq!(error.kind, ErrorKind::NotFound);

        let older = store.reset_link("ada@resets.example", day).await.unwrap().token;
        let newer = store.reset_link("ADA@resets.example", day).await.unwrap().token;
        gone(store.reset_password(&older, "hash-1").await.expect_err("ended by the newer link"));
        let moving = email_link(&store, &ada, "ada@moved.example", day).await.unwrap();
        let reset = store.reset_password(&newer, "hash-2").await.unwrap();
        assert_eq!(reset.id, ada.id);
        gone(store.reset_password(&newer, "hash-3").await.expect_err("used"));
        gone(store.confirm_email_change(&moving).await.err().expect("ended by the reset"));

        let before_change = store.reset_link("ada@resets.example", day).await.unwrap().token;
        let client = Client::default();
        // A session begun by a password change counts as proven only when its caller says so.
        let changed = store.set_password(&ada.id, "hash-4", &client, TIMES, None).await.unwrap();
        let session = store.session(&hash_key(&changed.token), TIMES).await.unwrap();
        assert_eq!(session.reauthenticate_after_ms, 0, "a session without proof is never recent");
        assert_eq!(store.session_proven_at(&session.id).await.unwrap(), None);
        gone(store.reset_password(&before_change, "hash-5").await.expect_err("ended by the password change"));

        let to_old_address = store.reset_link("ada@resets.example", day).await.unwrap().token;
        let moving = email_link(&store, &ada, "ada@moved.example", day).await.unwrap();
        store.confirm_email_change(&moving).await.unwrap();
        gone(store.reset_password(&to_old_address, "hash-6").await.expect_err("ended by the move"));
        let current = store.reset_link("ada@moved.example", day).await.unwrap().token;
        store.reset_password(&current, "hash-7").await.unwrap();
    })
    .await;
}

/// A replica cut off from PostgreSQL in the middle of a debit leaves its session open on the
/// server with the team's balance row locked, and nothing more arrives on it. The server ends
/// that session once it has idled `IDLE_IN_TRANSACTION` in its transaction, so the other
/// replicas' debits of the team wait seconds, not until TCP keepalive gives up (hours).
#[tokio::test]
async fn a_debit_left_unfinished_by_a_silent_replica_does_not_block_the_team() {
    let Some(database) = testdb::postgres().await.expect("test database") else {
        return;
    };
    let store = IdentityStore::open(&database.url).await.expect("open store");
    let silent = IdentityStore::open(&database.url).await.expect("open the silent replica's store");
    let id = team(&store, "Partitioned", false, 10).await;

    let mut unfinished = silent.db().pool().begin().await.unwrap();
    sqlx::query("UPDATE credit_balances SET balance = balance - 5 WHERE team_id = $1")
        .bind(&id)
        .execute(&mut *unfinished)
        .await
        .unwrap();

    let bound = switchboard_kit::db::IDLE_IN_TRANSACTION * 6;
    let debit = tokio::time::timeout(bound, store.debit(&id, 1, "search"))
        .await
        .unwrap_or_else(|_| panic!("the debit still waited on the silent session's lock after {bound:?}"))
        .expect("the debit");
    assert_eq!(debit.balance_after, 9, "the unfinished debit was rolled back");
    assert!(sqlx::query("SELECT 1").execute(&mut *unfinished).await.is_err(), "the server ended the idle session");
    drop(unfinished);
    assert_eq!(store.balance(&id).await.unwrap(), 9);
    store.db().close().await;
    silent.db().close().await;
}

fn sso<'a>(domains: &'a [String]) -> switchboard_identity::store::sso::NewSso<'a> {
    switchboard_identity::store::sso::NewSso {
        issuer: "https://login.example",
        client_id: "client",
        client_secret: Some("secret"),
        domains,
        default_role: "member",
        enabled: true,
    }
}

#[tokio::test]
async fn sso_domains_route_only_once_proven_and_only_to_the_team_that_proved_them() {
    use switchboard_identity::store::sso::ProofMethod;
    on_every_engine(|store| async move {
        let acme = team(&store, "Acme", false, 0).await;
        let squatter = team(&store, "Squatter", false, 0).await;
        let domains = vec!["acme.example".to_owned()];
        store.set_sso(&acme, &sso(&domains)).await.unwrap();
        // A claim no team proved blocks no one, and routes no one.
        store.set_sso(&squatter, &sso(&domains)).await.unwrap();
        assert_eq!(store.sso_team_of_domain("acme.example").await.unwrap(), None);
        let status = store.sso(&acme).await.unwrap().unwrap().config.domain_status;
        assert_eq!((status.len(), status[0].verified_at_ms), (1, 0));
        assert_eq!(status[0].txt_name, "_switchboard-verification.acme.example");
        let token = store.proof_token(&acme).await.unwrap();
        assert_eq!(status[0].txt_value, format!("switchboard-verification={token}"));
        assert_ne!(store.proof_token(&squatter).await.unwrap(), token, "each team has its own token");
        assert_eq!(store.proof_token(&acme).await.unwrap(), token, "a team's token stays");

        let proven = store.prove_domain(&acme, "acme.example", ProofMethod::Dns).await.unwrap();
        assert!(proven.verified_at_ms > 0);
        assert_eq!(store.sso_team_of_domain("acme.example").await.unwrap().as_deref(), Some(acme.as_str()));
        // Proven by one team: no other proves it or claims it anew.
        let again = store.prove_domain(&squatter, "acme.example", ProofMethod::Https).await.unwrap_err();
        assert_eq!(again.kind, ErrorKind::Conflict);
        let newcomer = team(&store, "Newcomer", false, 0).await;
        assert_eq!(store.set_sso(&newcomer, &sso(&domains)).await.unwrap_err().kind, ErrorKind::Conflict);
        let unclaimed = store.prove_domain(&newcomer, "acme.example", ProofMethod::Dns).await.unwrap_err();
        assert_eq!(unclaimed.kind, ErrorKind::NotFound);
        // Saving the settings again keeps the proof; dropping the domain releases it.
        store.set_sso(&acme, &sso(&domains)).await.unwrap();
        assert_eq!(store.sso_team_of_domain("acme.example").await.unwrap().as_deref(), Some(acme.as_str()));
        store.set_sso(&acme, &sso(&["eu.acme.example".to_owned()])).await.unwrap();
        assert_eq!(store.sso_team_of_domain("acme.example").await.unwrap(), None);
        store.prove_domain(&squatter, "acme.example", ProofMethod::Https).await.unwrap();
        assert_eq!(store.sso_team_of_domain("acme.example").await.unwrap().as_deref(), Some(squatter.as_str()));
        // Removing single sign-on releases its domains too.
        store.delete_sso(&squatter).await.unwrap();
        assert_eq!(store.sso_team_of_domain("acme.example").await.unwrap(), None);
    })
    .await;
}

#[tokio::test]
async fn sso_never_links_an_existing_account_by_email_and_owners_only_by_their_own_link() {
    use switchboard_identity::store::sso::Vouched;
    use switchboard_proto::v1::Client;
    on_every_engine(|store| async move {
        let acme = team(&store, "Acme", false, 0).await;
        let client = Client::default();
        let existing =
            store.create_user(&acme, &NewUser { role: "owner".into(), ..user("owner@acme.example") }).await.unwrap();
        let vouched = Vouched {
            subject: "https://login.example|owner-1",
            email: "Owner@acme.example",
            first_name: "A",
            last_name: "B",
        };
        // Found by e-mail: not linked, not signed in.
        let refused = store.sso_sign_in(&acme, &vouched, "member", &client, TIMES).await.unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Conflict);
        assert!(refused.message.contains("not been linked"), "{}", refused.message);
        assert!(!store.sso_linked(&existing).await.unwrap());
        // Linked by its person: signed in by subject.
        store.link_sso(&existing, vouched.subject).await.unwrap();
        assert!(store.sso_linked(&existing).await.unwrap());
        let (signed_in, created) = store.sso_sign_in(&acme, &vouched, "member", &client, TIMES).await.unwrap();
        assert!(!created);
        assert_eq!(signed_in.session.unwrap().user.unwrap().id, existing.id);
        // A subject is one person's.
        let other = store.create_user(&acme, &user("other@acme.example")).await.unwrap();
        assert_eq!(store.link_sso(&other, vouched.subject).await.unwrap_err().kind, ErrorKind::Conflict);

        // A new address: made with the role given, linked as created.
        let grace = Vouched {
            subject: "https://login.example|grace-1",
            email: "grace@acme.example",
            first_name: "Grace",
            last_name: "H",
        };
        let (signed_in, created) = store.sso_sign_in(&acme, &grace, "viewer", &client, TIMES).await.unwrap();
        assert!(created);
        let grace_user = signed_in.session.unwrap().user.unwrap();
        assert_eq!(grace_user.role, "viewer");
        store.sso_sign_in(&acme, &grace, "member", &client, TIMES).await.unwrap();
        // Made an owner later, a person created by single sign-on must link it themselves.
        store.set_role(&acme, &grace_user.id, "owner", "owner").await.unwrap();
        let owner_now = store.sso_sign_in(&acme, &grace, "member", &client, TIMES).await.unwrap_err();
        assert_eq!(owner_now.kind, ErrorKind::Conflict);
        let grace_user = store.user(&grace_user.id).await.unwrap();
        store.link_sso(&grace_user, grace.subject).await.unwrap();
        store.sso_sign_in(&acme, &grace, "member", &client, TIMES).await.unwrap();

        // An address of another team's account is that team's.
        let elsewhere = team(&store, "Elsewhere", false, 0).await;
        let foreign = Vouched {
            subject: "https://login.example|x",
            email: "owner@acme.example",
            first_name: "X",
            last_name: "Y",
        };
        assert_eq!(
            store.sso_sign_in(&elsewhere, &foreign, "member", &client, TIMES).await.unwrap_err().kind,
            ErrorKind::Conflict
        );
    })
    .await;
}

/// A try that the person's failure limit refused checked no code: it is not a failure. (A burst
/// of tries in flight together, refused with 429, locked the person out for 15 minutes.)
#[tokio::test]
async fn a_refused_second_factor_try_does_not_count_as_a_failure() {
    use switchboard_identity::store::second_factor::{FAILURES_PER_WINDOW, Purpose};
    on_every_engine(|store| async move {
        let id = team(&store, "Burst", false, 0).await;
        let ada = store.create_user(&id, &user("ada@burst.example")).await.unwrap();
        let client = Client::default();
        let mut tried = Vec::new();
        for _ in 0..FAILURES_PER_WINDOW {
            let (token, _) = store.create_challenge(&ada, &client, Purpose::SignIn).await.unwrap();
            tried.push(store.challenge(&token).await.unwrap());
        }
        let (last, _) = store.create_challenge(&ada, &client, Purpose::SignIn).await.unwrap();
        let refused = store.challenge(&last).await.expect_err("over the limit");
        assert_eq!(refused.kind, ErrorKind::RateLimited);
        // One of the ten was the person's own code after all: nine failures are left, and the
        // refused try is not among them.
        store.finish_challenge(&tried[0].id).await.unwrap();
        store.challenge(&last).await.expect("the tenth failure is still allowed");
    })
    .await;
}
