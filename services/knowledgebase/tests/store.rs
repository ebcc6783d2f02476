//! The knowledgebase store on SQLite and on PostgreSQL (when `TEST_DATABASE_URL` is set):
//! the webpage refresh rule under a controlled clock, source content replaced as a whole,
//! isolation between teams, and the index repaired at start from what SQL holds.

#![allow(clippy::unwrap_used)]

use std::future::Future;

use switchboard_kit::ErrorKind;
use switchboard_kit::testdb;
use switchboard_knowledgebase::store::{
    EntryText, ExtractedEntry, KnowledgeStore, NewDocument, REFRESH_INTERVAL_MS, RefreshInterval, SourceKind,
    SourcePatch,
};

async fn on_every_engine<F, Fut>(test: F)
where
    F: Fn(KnowledgeStore, String) -> Fut,
    Fut: Future<Output = ()>,
{
    for database in testdb::all().await.unwrap() {
        eprintln!("engine: {:?}", database.engine);
        let store = KnowledgeStore::open(&database.url).await.unwrap();
        test(store.clone(), database.url.clone()).await;
        store.db().close().await;
    }
}

fn team() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// What an ingest does once the entries are embedded (this store has no vector index to
/// wait for between the two steps).
async fn finish(store: &KnowledgeStore, kind: SourceKind, source_id: &str, entries: &[ExtractedEntry]) -> bool {
    store.store_entries(kind, source_id, entries, "m").await.unwrap()
        && store.mark_ready(kind, source_id).await.unwrap()
}

fn entry(question: &str, answer: &str) -> ExtractedEntry {
    ExtractedEntry { text: EntryText { question: question.into(), answer: answer.into() }, embedding: vec![0.5; 8] }
}

async fn knowledgebase(store: &KnowledgeStore, team: &str) -> String {
    store.create_knowledgebase(team, "Support", None).await.unwrap().id
}

#[tokio::test]
async fn refresh_follows_the_spec_state_table_under_a_controlled_clock() {
    on_every_engine(|store, _| async move {
        let team = team();
        let kb = knowledgebase(&store, &team).await;
        let page = store
            .create_webpage(&team, &kb, "FAQ", "https://example.com/faq", None, RefreshInterval::Off)
            .await
            .unwrap();
        assert_eq!(page.status, "pending");

        // The first scrape is under way: a refresh is a conflict.
        let error = store.request_refresh(&team, &kb, &page.id, 1_000).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::Conflict);

        assert!(finish(&store, SourceKind::Webpage, &page.id, &[entry("Hours", "9 to 5")]).await);
        let t0 = 10_000_000;
        let refreshing = store.request_refresh(&team, &kb, &page.id, t0).await.unwrap();
        assert_eq!(refreshing.status, "refreshing");
        assert_eq!(store.request_refresh(&team, &kb, &page.id, t0 + 1).await.unwrap_err().kind, ErrorKind::Conflict);

        assert!(finish(&store, SourceKind::Webpage, &page.id, &[entry("Hours", "9 to 6")]).await);
        let limited = store.request_refresh(&team, &kb, &page.id, t0 + 3_600_000).await.unwrap_err();
        assert_eq!(limited.kind, ErrorKind::RateLimited);
        assert_eq!(limited.retry_at_ms, Some(t0 + REFRESH_INTERVAL_MS));
        let still = store.request_refresh(&team, &kb, &page.id, t0 + REFRESH_INTERVAL_MS - 1).await.unwrap_err();
        assert_eq!(still.kind, ErrorKind::RateLimited);

        let again = store.request_refresh(&team, &kb, &page.id, t0 + REFRESH_INTERVAL_MS).await.unwrap();
        assert_eq!(again.status, "refreshing");
        assert_eq!(again.last_refresh_requested_at_ms, Some(t0 + REFRESH_INTERVAL_MS));
    })
    .await;
}

#[tokio::test]
async fn scheduled_refreshes_are_due_by_interval_and_follow_the_manual_rules() {
    on_every_engine(|store, _| async move {
        let team = team();
        let kb = knowledgebase(&store, &team).await;
        let day = REFRESH_INTERVAL_MS;
        let daily = store.create_webpage(&team, &kb, "Daily", "https://example.com/d", None, RefreshInterval::Daily);
        let daily = daily.await.unwrap();
        let weekly = store.create_webpage(&team, &kb, "Weekly", "https://example.com/w", None, RefreshInterval::Weekly);
        let weekly = weekly.await.unwrap();
        let off = store.create_webpage(&team, &kb, "Off", "https://example.com/o", None, RefreshInterval::Off);
        let off = off.await.unwrap();
        assert_eq!(daily.refresh_interval, "daily");
        assert_eq!(daily.next_refresh_at_ms, Some(daily.created_at_ms + day));
        assert_eq!(weekly.next_refresh_at_ms, Some(weekly.created_at_ms + 7 * day));
        assert_eq!(off.next_refresh_at_ms, None);
        let due_ids = |now: i64| {
            let store = store.clone();
            async move {
                let due = store.due_refreshes(now, 100).await.unwrap();
                let mut ids: Vec<String> = due.into_iter().map(|d| d.webpage_id).collect();
                ids.sort();
                ids
            }
        };
        // Pending pages (the first scrape) are never due.
        assert!(due_ids(daily.created_at_ms + 30 * day).await.is_empty());
        for page in [&daily, &weekly, &off] {
            assert!(finish(&store, SourceKind::Webpage, &page.id, &[entry("Hours", "9 to 5")]).await);
        }
        let created = daily.created_at_ms.max(weekly.created_at_ms);
        assert!(due_ids(created + day - 1_000).await.is_empty());
        assert_eq!(due_ids(created + day).await, std::slice::from_ref(&daily.id));
        let mut both = vec![daily.id.clone(), weekly.id.clone()];
        both.sort();
        assert_eq!(due_ids(created + 7 * day).await, both);

        // A manual refresh moves the schedule: the next one is a day after it.
        let t1 = created + day + 5;
        store.request_refresh(&team, &kb, &daily.id, t1).await.unwrap();
        assert!(!due_ids(t1 + day).await.contains(&daily.id), "a page being refreshed is not due");
        assert!(finish(&store, SourceKind::Webpage, &daily.id, &[entry("Hours", "9 to 6")]).await);
        assert!(!due_ids(t1 + day - 1).await.contains(&daily.id));
        assert!(due_ids(t1 + day).await.contains(&daily.id));

        // Turned off, a page is never due; another team's pages are listed with their team.
        let patch = SourcePatch { refresh_interval: Some(RefreshInterval::Off), ..Default::default() };
        let updated = store.update_webpage(&team, &kb, &daily.id, &patch).await.unwrap();
        assert_eq!((updated.refresh_interval.as_str(), updated.next_refresh_at_ms), ("off", None));
        assert!(!due_ids(t1 + 30 * day).await.contains(&daily.id));
        let due = store.due_refreshes(created + 7 * day, 100).await.unwrap();
        assert!(due.iter().all(|d| d.team_id == team && d.knowledgebase_id == kb));
    })
    .await;
}

#[tokio::test]
async fn of_two_simultaneous_refreshes_exactly_one_wins() {
    on_every_engine(|store, _| async move {
        let team = team();
        let kb = knowledgebase(&store, &team).await;
        let page = store
            .create_webpage(&team, &kb, "FAQ", "https://example.com/faq", None, RefreshInterval::Off)
            .await
            .unwrap();
        finish(&store, SourceKind::Webpage, &page.id, &[entry("Hours", "9 to 5")]).await;
        let (a, b) = tokio::join!(
            store.request_refresh(&team, &kb, &page.id, 5_000),
            store.request_refresh(&team, &kb, &page.id, 5_000)
        );
        let (wins, losses): (Vec<_>, Vec<_>) = [a, b].into_iter().partition(Result::is_ok);
        assert_eq!((wins.len(), losses.len()), (1, 1), "{wins:?} {losses:?}");
        let loser = losses.into_iter().next().unwrap().unwrap_err();
        assert!(matches!(loser.kind, ErrorKind::Conflict | ErrorKind::RateLimited), "{loser:?}");
    })
    .await;
}

#[tokio::test]
async fn a_scrape_replaces_the_content_and_a_failure_keeps_it() {
    on_every_engine(|store, _| async move {
        let team = team();
        let kb = knowledgebase(&store, &team).await;
        let page = store
            .create_webpage(&team, &kb, "FAQ", "https://example.com/faq", None, RefreshInterval::Off)
            .await
            .unwrap();
        // Stored entries alone do not make the page ready: that waits for the vector index.
        let stored = [entry("A", "1"), entry("B", "2"), entry("C", "3")];
        assert!(store.store_entries(SourceKind::Webpage, &page.id, &stored, "m").await.unwrap());
        assert_eq!(store.webpage(&team, &kb, &page.id).await.unwrap().status, "pending");
        assert!(store.mark_ready(SourceKind::Webpage, &page.id).await.unwrap());
        assert_eq!(store.webpage(&team, &kb, &page.id).await.unwrap().status, "ready");
        let content = store.source_entries(&team, &page.id).await.unwrap();
        assert_eq!(content.iter().map(|r| r.question.as_str()).collect::<Vec<_>>(), ["A", "B", "C"]);
        assert_eq!(content[0].source.as_ref().unwrap().name.as_deref(), Some("FAQ"));

        finish(&store, SourceKind::Webpage, &page.id, &[entry("D", "4")]).await;
        let content = store.source_entries(&team, &page.id).await.unwrap();
        assert_eq!(content.len(), 1);
        assert_eq!(content[0].question, "D");

        // A job queued before the last good scrape fails: the newer content's status stands.
        store.fail_source(SourceKind::Webpage, &page.id, "stale failure", 0).await.unwrap();
        assert_eq!(store.webpage(&team, &kb, &page.id).await.unwrap().status, "ready");
        store.fail_source(SourceKind::Webpage, &page.id, "the page answered HTTP 500", i64::MAX).await.unwrap();
        let failed = store.webpage(&team, &kb, &page.id).await.unwrap();
        assert_eq!(failed.status, "failed");
        assert_eq!(failed.failure_reason.as_deref(), Some("the page answered HTTP 500"));
        assert_eq!(failed.entry_count, 1);
        assert!(failed.last_scraped_at_ms.is_some());

        // Extracted entries are not manual references.
        assert!(store.manual_references(&team, &kb).await.unwrap().is_empty());
        let listed = store.list_knowledgebases(&team, std::slice::from_ref(&kb)).await.unwrap();
        let counted = listed[0].counts.unwrap();
        assert_eq!((counted.webpages, counted.references), (1, 0));

        store.delete_webpage(&team, &kb, &page.id).await.unwrap();
        assert!(store.source_entries(&team, &page.id).await.unwrap().is_empty());
        assert_eq!(store.webpage(&team, &kb, &page.id).await.unwrap_err().kind, ErrorKind::NotFound);
        // A scrape that ends after the page was deleted stores nothing.
        assert!(!finish(&store, SourceKind::Webpage, &page.id, &[entry("E", "5")]).await);
        assert_eq!(store.count_entries().await.unwrap(), 0);
    })
    .await;
}

#[tokio::test]
async fn webpage_fields_are_validated_and_updates_do_not_rescrape() {
    on_every_engine(|store, _| async move {
        let team = team();
        let kb = knowledgebase(&store, &team).await;
        for url in ["ftp://example.com/", "not a url", "https://", "javascript:alert(1)"] {
            let error = store.create_webpage(&team, &kb, "Bad", url, None, RefreshInterval::Off).await.unwrap_err();
            assert_eq!(error.kind, ErrorKind::Validation, "{url}");
        }
        let long_name = "n".repeat(256);
        assert_eq!(
            store
                .create_webpage(&team, &kb, &long_name, "https://example.com", None, RefreshInterval::Off)
                .await
                .unwrap_err()
                .kind,
            ErrorKind::Validation
        );
        let page = store
            .create_webpage(&team, &kb, "FAQ", "https://example.com/faq", Some("old"), RefreshInterval::Off)
            .await
            .unwrap();
        finish(&store, SourceKind::Webpage, &page.id, &[entry("A", "1")]).await;
        let patch =
            SourcePatch { url: Some("https://example.org/new".into()), notes: Some(None), ..Default::default() };
        let updated = store.update_webpage(&team, &kb, &page.id, &patch).await.unwrap();
        assert_eq!(updated.url, "https://example.org/new");
        assert_eq!(updated.notes, None);
        assert_eq!(updated.status, "ready");
        assert_eq!(updated.entry_count, 1);
    })
    .await;
}

#[tokio::test]
async fn sources_of_another_team_are_not_found() {
    on_every_engine(|store, _| async move {
        let (owner, other) = (team(), team());
        let kb = knowledgebase(&store, &owner).await;
        let page = store
            .create_webpage(&owner, &kb, "FAQ", "https://example.com/faq", None, RefreshInterval::Off)
            .await
            .unwrap();
        let document = store
            .create_document(
                &owner,
                &kb,
                &NewDocument {
                    id: uuid::Uuid::now_v7().to_string(),
                    name: "Prices".into(),
                    notes: None,
                    file_name: "prices.txt".into(),
                    content_type: "text/plain".into(),
                    size_bytes: 10,
                    object_key: "k".into(),
                },
            )
            .await
            .unwrap();
        assert_eq!(document.status, "pending");
        assert_eq!(store.webpage(&other, &kb, &page.id).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(store.document(&other, &kb, &document.id).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(store.request_refresh(&other, &kb, &page.id, 0).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(store.delete_webpage(&other, &kb, &page.id).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(store.delete_document(&other, &kb, &document.id).await.unwrap_err().kind, ErrorKind::NotFound);
        let patch = SourcePatch { name: Some("Mine".into()), ..Default::default() };
        assert_eq!(
            store.update_document(&other, &kb, &document.id, &patch).await.unwrap_err().kind,
            ErrorKind::NotFound
        );
        assert_eq!(
            store
                .create_webpage(&other, &kb, "X", "https://example.com", None, RefreshInterval::Off)
                .await
                .unwrap_err()
                .kind,
            ErrorKind::NotFound
        );

        assert!(finish(&store, SourceKind::Document, &document.id, &[entry("Price", "10 euros")]).await);
        let ready = store.document(&owner, &kb, &document.id).await.unwrap();
        assert_eq!((ready.status.as_str(), ready.entry_count), ("ready", 1));
        let (_, key) = store.delete_document(&owner, &kb, &document.id).await.unwrap();
        assert_eq!(key, "k");
        assert_eq!(store.count_entries().await.unwrap(), 0);
    })
    .await;
}

mod repair {
    use switchboard_knowledgebase::embed::{EmbeddingConfig, default_model_dir};
    use switchboard_knowledgebase::index::IndexConfig;
    use switchboard_knowledgebase::objects::ObjectsConfig;
    use switchboard_knowledgebase::sources::fetch::FetchPolicy;
    use switchboard_knowledgebase::{DEFAULT_MAX_UPLOAD_BYTES, Settings};

    use super::*;

    fn settings(database_url: &str, dir: &std::path::Path) -> Settings {
        Settings {
            database_url: database_url.to_owned(),
            index: IndexConfig {
                path: dir.join("index"),
                qdrant_url: None,
                qdrant_api_key: None,
                collection: "test".into(),
                dimensions: 0,
            },
            embedding: EmbeddingConfig { model_dir: default_model_dir(), openai: None },
            objects: ObjectsConfig::Local(dir.join("objects")),
            max_upload_bytes: DEFAULT_MAX_UPLOAD_BYTES,
            fetch: FetchPolicy::from_env(),
            chat: None,
            refresh_day_ms: REFRESH_INTERVAL_MS,
            budget: switchboard_knowledgebase::budget::BudgetSettings::default(),
        }
    }

    /// A write whose index update never happened (a crash in between) is applied when the
    /// service opens next.
    #[tokio::test]
    async fn changes_committed_but_not_indexed_are_applied_at_start() {
        on_every_engine(|_, url| async move {
            let dir = tempfile::tempdir().unwrap();
            let first = switchboard_knowledgebase::open(settings(&url, dir.path())).await.unwrap();
            let team = team();
            let kb = knowledgebase(&first.store, &team).await;
            let text =
                EntryText { question: "Where is the spare key?".into(), answer: "Under the blue flower pot.".into() };
            let vector = first.embedder.embed(vec![text.embedding_input()]).await.unwrap().pop().unwrap();
            // Straight to the store: SQL and the outbox have it, the index does not.
            let tag = switchboard_knowledgebase::passages::embedding_tag(first.embedder.model());
            first.store.insert_reference(&team, &kb, &text, &vector, &tag).await.unwrap();
            assert!(first.search(&team, &kb, "spare key location", 5, 0.1).await.unwrap().is_empty());
            drop(first);

            let second = switchboard_knowledgebase::open(settings(&url, dir.path())).await.unwrap();
            let hits = second.search(&team, &kb, "spare key location", 5, 0.1).await.unwrap();
            assert_eq!(hits.len(), 1);
            assert_eq!(hits[0].reference.as_ref().unwrap().answer, "Under the blue flower pot.");
        })
        .await;
    }

    /// Entries stored before passages (one vector, the bare model name) are indexed as they are
    /// by a fill from SQL, and brought up to date by a rebuild: a short one keeps its vector and gets the new tag, a long one is embedded
    /// again as passages, and a fact at its end is then found.
    #[tokio::test]
    async fn entries_of_another_model_stay_out_of_the_index_until_a_rebuild_embeds_them() {
        on_every_engine(|_, url| async move {
            let dir = tempfile::tempdir().unwrap();
            let knowledge = switchboard_knowledgebase::open(settings(&url, dir.path())).await.unwrap();
            let (team, embedder) = (team(), knowledge.embedder.clone());
            let kb = knowledgebase(&knowledge.store, &team).await;
            let ours = EntryText { question: "Opening hours?".into(), answer: "Nine to five on weekdays.".into() };
            let theirs = EntryText { question: "Parking".into(), answer: "Guests park free behind the hotel.".into() };
            let vector = embedder.embed(vec![ours.embedding_input()]).await.unwrap().pop().unwrap();
            knowledge.store.insert_reference(&team, &kb, &ours, &vector, embedder.model()).await.unwrap();
            // Two vectors of another model's size and name, as a deployment that switched models has.
            let other: Vec<f32> = (0..2 * embedder.dimensions()).map(|i| (i % 7) as f32).collect();
            let stranger = knowledge
                .store
                .insert_reference(&team, &kb, &theirs, &other, "some-other-model; passages 128/96")
                .await
                .unwrap();

            assert_eq!(knowledge.sync.fill_from_sql().await.unwrap(), 1, "only this model's entry");
            assert_eq!(knowledge.sync.index().count().await.unwrap(), 1);

            assert_eq!(knowledge.sync.rebuild(embedder.as_ref()).await.unwrap(), 2);
            let hits = knowledge.search(&team, &kb, "where can guests leave the car", 1, 0.3).await.unwrap();
            assert_eq!(hits[0].reference.as_ref().unwrap().id, stranger.id);
        })
        .await;
    }

    #[tokio::test]
    async fn a_rebuild_embeds_old_long_entries_as_passages() {
        on_every_engine(|_, url| async move {
            let dir = tempfile::tempdir().unwrap();
            let knowledge = switchboard_knowledgebase::open(settings(&url, dir.path())).await.unwrap();
            let (team, embedder) = (team(), knowledge.embedder.clone());
            let kb = knowledgebase(&knowledge.store, &team).await;
            let short = EntryText { question: "Opening hours?".into(), answer: "Nine to five on weekdays.".into() };
            let filler = "Visitors sign in at reception and wear a badge while in the building. ".repeat(30);
            let long = EntryText {
                question: "Building rules".into(),
                answer: format!("{filler}The spare key to the bicycle room hangs in the red lockbox."),
            };
            let mut ids = Vec::new();
            for text in [&short, &long] {
                let vector = embedder.embed(vec![text.embedding_input()]).await.unwrap().pop().unwrap();
                let reference =
                    knowledge.store.insert_reference(&team, &kb, text, &vector, embedder.model()).await.unwrap();
                ids.push(reference.id);
            }
            let before = knowledge.store.indexed_entries(&ids).await.unwrap();

            // What a start does with an empty index: the stored vectors as they are, the long
            // entry's one old vector on its first passage.
            assert_eq!(knowledge.sync.fill_from_sql().await.unwrap(), 2);
            assert_eq!(knowledge.sync.index().count().await.unwrap(), 2);
            let hits = knowledge.search(&team, &kb, "visitors sign in and wear a badge", 1, 0.3).await.unwrap();
            assert_eq!(hits[0].reference.as_ref().unwrap().id, ids[1]);

            assert_eq!(knowledge.sync.rebuild(embedder.as_ref()).await.unwrap(), 2);
            let tag = switchboard_knowledgebase::passages::embedding_tag(embedder.model());
            assert!(knowledge.store.stale_embeddings(&tag, 10).await.unwrap().is_empty());
            let after = knowledge.store.indexed_entries(&ids).await.unwrap();
            let find = |entries: &[switchboard_knowledgebase::store::IndexedEntry], id: &str| {
                entries.iter().find(|e| e.id == id).unwrap().clone()
            };
            assert_eq!(find(&after, &ids[0]).embedding, find(&before, &ids[0]).embedding);
            let passages = switchboard_knowledgebase::passages::passages(&long).len();
            assert!(passages > 1);
            assert_eq!(find(&after, &ids[1]).embedding.len(), passages * embedder.dimensions());
            assert_eq!(knowledge.sync.index().count().await.unwrap(), 1 + passages);
            let hits = knowledge.search(&team, &kb, "where is the bicycle room key", 1, 0.3).await.unwrap();
            assert_eq!(hits[0].reference.as_ref().unwrap().id, ids[1]);
        })
        .await;
    }
}
