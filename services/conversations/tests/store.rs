//! The conversations store on SQLite and on PostgreSQL (when `TEST_DATABASE_URL` is set).

#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::time::Duration;

use sqlx::Row;
use switchboard_conversations::ConversationStore;
use switchboard_conversations::store::{
    AnalysisEnd, CallCost, CallEnd, CallFilter, CallFlags, CallSort, Channel, ChatEnd, ChatFilter, ChatSort,
    ChatStatus, Direction, DisconnectionReason, ExportCursor, NewCall, NewChat, NewEvent, NewMessage, NewSegment,
    RecordingMeta, Role, Sentiment, Speaker,
};
use switchboard_kit::db::Engine;
use switchboard_kit::{ErrorKind, ServiceError, testdb};
use switchboard_proto::v1::{Call, Chat};

async fn on_every_engine<F, Fut>(test: F)
where
    F: Fn(ConversationStore) -> Fut,
    Fut: Future<Output = ()>,
{
    for database in testdb::all().await.unwrap() {
        let store = ConversationStore::open(&database.url).await.unwrap();
        eprintln!("engine: {:?}", database.engine);
        test(store.clone()).await;
        store.db().close().await;
    }
}

fn team() -> String {
    uuid::Uuid::new_v4().to_string()
}

const CALLER: &str = "+14155552671";
const LINE: &str = "+14155550100";

fn new_call(external_id: &str, started_at_ms: i64) -> NewCall {
    NewCall {
        external_id: external_id.into(),
        agent_id: None,
        from: CALLER.into(),
        to: LINE.into(),
        direction: Direction::Incoming,
        status: "in-progress".into(),
        started_at_ms,
    }
}

fn segment(seq: i64, text: &str, offset_ms: i64) -> NewSegment {
    NewSegment { seq, speaker: Speaker::Caller, text: text.into(), offset_ms }
}

fn end(ended_at_ms: i64, summary: Option<&str>) -> CallEnd {
    CallEnd::plain(ended_at_ms, "completed".into(), summary.map(str::to_owned), None)
}

fn calls_filter() -> CallFilter {
    CallFilter {
        page: 1,
        limit: 100,
        search: None,
        direction: None,
        agent_id: None,
        min_duration: None,
        max_duration: None,
        created_from_ms: None,
        created_to_ms: None,
        number: None,
        sentiment: None,
        successful: None,
        disconnection_reason: None,
        sort: CallSort::CreatedAt,
        ascending: true,
    }
}

fn new_chat(external_id: &str, started_at_ms: i64) -> NewChat {
    NewChat {
        external_id: external_id.into(),
        agent_id: None,
        channel: Channel::Web,
        contact_number: None,
        contact_email: None,
        started_at_ms,
    }
}

fn message(external_id: &str, text: &str, created_at_ms: i64) -> NewMessage {
    NewMessage { external_id: external_id.into(), role: Role::User, text: text.into(), created_at_ms }
}

fn chats_filter() -> ChatFilter {
    ChatFilter {
        page: 1,
        limit: 100,
        search: None,
        channel: None,
        agent_id: None,
        status: None,
        created_from_ms: None,
        created_to_ms: None,
        sort: ChatSort::CreatedAt,
        ascending: true,
    }
}

fn fields(error: &ServiceError) -> Vec<&str> {
    assert_eq!(error.kind, ErrorKind::Validation, "{error}");
    error.details.iter().map(|d| d.field.as_str()).collect()
}

async fn listed_calls(store: &ConversationStore, team_id: &str, filter: CallFilter) -> Vec<String> {
    store.list_calls(team_id, &filter).await.unwrap().0.into_iter().map(|call| call.external_id).collect()
}

async fn searched_calls(store: &ConversationStore, team_id: &str, search: &str) -> Vec<String> {
    listed_calls(store, team_id, CallFilter { search: Some(search.into()), ..calls_filter() }).await
}

async fn searched_chats(store: &ConversationStore, team_id: &str, search: &str) -> Vec<String> {
    let filter = ChatFilter { search: Some(search.into()), ..chats_filter() };
    store.list_chats(team_id, &filter).await.unwrap().0.into_iter().map(|chat| chat.external_id).collect()
}

/// Lets the clock move on, so that a write would show in `updated_at`.
async fn tick() {
    tokio::time::sleep(Duration::from_millis(3)).await;
}

async fn rows(store: &ConversationStore, sql: &str, id: &str) -> i64 {
    sqlx::query(sql).bind(id).fetch_one(store.db().pool()).await.unwrap().try_get(0).unwrap()
}

#[test]
fn the_jobs_table_is_the_kits() {
    switchboard_kit::jobs::check_migrations(&switchboard_conversations::MIGRATIONS).unwrap();
}

#[tokio::test]
async fn upserting_the_same_call_twice_changes_nothing() {
    on_every_engine(|store| async move {
        let team = team();
        let agent = uuid::Uuid::new_v4().to_string();
        let first =
            store.upsert_call(&team, NewCall { agent_id: Some(agent.clone()), ..new_call("c1", 1_000) }).await.unwrap();
        assert_eq!((first.from.as_str(), first.direction.as_str(), first.flagged), (CALLER, "INCOMING", false));
        assert_eq!((first.ended_at_ms, first.duration_seconds), (None, None));
        tick().await;
        let again =
            store.upsert_call(&team, NewCall { agent_id: Some(agent.clone()), ..new_call("c1", 1_000) }).await.unwrap();
        assert_eq!(again, first);
        // An absent agent keeps the stored one.
        let without_agent = store.upsert_call(&team, new_call("c1", 1_000)).await.unwrap();
        assert_eq!(without_agent, first);

        let changed = store
            .upsert_call(
                &team,
                NewCall { status: "completed".into(), to: "+442079460018".into(), ..new_call("c1", 1_000) },
            )
            .await
            .unwrap();
        assert_eq!((changed.id.as_str(), changed.status.as_str()), (first.id.as_str(), "completed"));
        assert!(changed.updated_at_ms > first.updated_at_ms);
        assert_eq!(changed.agent_id.as_deref(), Some(agent.as_str()));
        assert_eq!(searched_calls(&store, &team, "2079460018").await, ["c1"]);
        assert_eq!(searched_calls(&store, &team, "5550100").await, Vec::<String>::new());
        assert_eq!(store.call(&team, &first.id).await.unwrap().to, "+442079460018");
    })
    .await;
}

#[tokio::test]
async fn concurrent_upserts_of_one_call_make_one_call() {
    on_every_engine(|store| async move {
        let team = team();
        for round in 0..5 {
            let external_id = format!("race-{round}");
            let (a, b) = tokio::join!(
                store.upsert_call(&team, new_call(&external_id, 1_000)),
                store.upsert_call(&team, NewCall { status: "ringing".into(), ..new_call(&external_id, 1_000) }),
            );
            assert_eq!(a.unwrap().id, b.unwrap().id);
        }
        let (_, page) = store.list_calls(&team, &calls_filter()).await.unwrap();
        assert_eq!(page.total_count, 5);
    })
    .await;
}

/// On PostgreSQL each call and chat keeps the trigram signature of all its search text:
/// every search its text answers passes the check, and a text it does not hold mostly fails it.
#[tokio::test]
async fn signatures_cover_every_text_of_a_conversation() {
    on_every_engine(|store| async move {
        if store.db().engine() != Engine::Postgres {
            return;
        }
        let team = team();
        let quokka = store.upsert_call(&team, new_call("c1", 1_700_000_000_000)).await.unwrap();
        store.append_transcript(&team, "c1", vec![segment(1, "Is the Quokka plushie back?", 0)]).await.unwrap();
        store.end_call(&team, "c1", end(1_700_000_060_000, Some("Asked about stock"))).await.unwrap();
        let other = store.upsert_call(&team, new_call("c2", 1_700_000_000_000)).await.unwrap();
        store.append_transcript(&team, "c2", vec![segment(1, "Where is my order?", 0)]).await.unwrap();
        let chat = store.upsert_chat(&team, new_chat("h1", 500)).await.unwrap();
        store.append_chat_messages(&team, "h1", vec![message("m1", "Any quokkas left?", 1_000)]).await.unwrap();

        let passes = |table: &'static str, id: String, query: &'static str| {
            let store = store.clone();
            async move {
                let bits = switchboard_kit::signature::Signature::of(query).bit_string();
                let kind = switchboard_kit::signature::SQL_TYPE;
                let sql =
                    format!("SELECT (text_signature & $1::{kind}) = $1::{kind} AS passes FROM {table} WHERE id = $2");
                let row = sqlx::query(&sql).bind(bits).bind(id).fetch_one(store.db().pool()).await.unwrap();
                row.try_get::<bool, _>("passes").unwrap()
            }
        };
        for query in ["quokka", "plushie back", "stock", "+14155552671", "14155550100"] {
            assert!(passes("calls", quokka.id.clone(), query).await, "{query}");
        }
        assert!(passes("calls", other.id.clone(), "my order").await);
        assert!(!passes("calls", other.id.clone(), "quokka plushie").await);
        assert!(passes("chats", chat.id.clone(), "quokkas").await);
        assert!(!passes("chats", chat.id.clone(), "where is my order").await);
        // A row written without a signature (every bit set, the column's default) passes.
        sqlx::query("UPDATE calls SET text_signature = DEFAULT WHERE id = $1")
            .bind(other.id.clone())
            .execute(store.db().pool())
            .await
            .unwrap();
        assert!(passes("calls", other.id.clone(), "quokka plushie").await);
    })
    .await;
}

#[tokio::test]
async fn segments_come_back_in_seq_order_once_each() {
    on_every_engine(|store| async move {
        let team = team();
        let call = store.upsert_call(&team, new_call("c1", 1_700_000_000_000)).await.unwrap();
        let first = store
            .append_transcript(
                &team,
                "c1",
                vec![segment(3, "three", 3_000), segment(1, "one", 1_000), segment(2, "two", 2_000)],
            )
            .await
            .unwrap();
        assert_eq!((first.appended, first.total), (3, 3));
        let again = store
            .append_transcript(
                &team,
                "c1",
                vec![
                    segment(2, "changed", 9),
                    segment(4, "four", 4_000),
                    segment(4, "four again", 5),
                    segment(1, "x", 0),
                ],
            )
            .await
            .unwrap();
        assert_eq!((again.appended, again.total), (1, 4));

        let read = store.call(&team, &call.id).await.unwrap();
        let transcript: Vec<_> = read.transcript.iter().map(|s| (s.seq, s.text.as_str(), s.speaker.as_str())).collect();
        assert_eq!(
            transcript,
            [(1, "one", "caller"), (2, "two", "caller"), (3, "three", "caller"), (4, "four", "caller")]
        );
        for segment in &read.transcript {
            assert_eq!(segment.timestamp_ms, 1_700_000_000_000 + segment.offset_ms);
        }
        assert_eq!(read.transcript[3].offset_ms, 4_000);
        // The new text is searchable, the refused repeats are not.
        assert_eq!(searched_calls(&store, &team, "four").await, ["c1"]);
        assert_eq!(searched_calls(&store, &team, "changed").await, Vec::<String>::new());
        // Timestamps follow a corrected start.
        store.upsert_call(&team, new_call("c1", 1_700_000_000_500)).await.unwrap();
        let moved = store.call_by_external_id(&team, "c1").await.unwrap();
        assert_eq!(moved.transcript[0].timestamp_ms, 1_700_000_001_500);
        // upsert_call answers with the transcript, and the list shows it too.
        assert_eq!(store.upsert_call(&team, new_call("c1", 1_700_000_000_500)).await.unwrap().transcript.len(), 4);
        let (listed, _) = store.list_calls(&team, &calls_filter()).await.unwrap();
        assert_eq!(listed[0].transcript.len(), 4);
        assert!(listed[0].timeline.is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_batch_with_one_invalid_segment_writes_nothing() {
    on_every_engine(|store| async move {
        let team = team();
        let call = store.upsert_call(&team, new_call("c1", 1_000)).await.unwrap();
        let error = store
            .append_transcript(
                &team,
                "c1",
                vec![segment(0, "fine", 0), segment(1, " ", 10), segment(-1, "late", -5), segment(3, "a\0b", 0)],
            )
            .await
            .unwrap_err();
        assert_eq!(fields(&error), ["segments[1].text", "segments[2].seq", "segments[2].offsetMs", "segments[3].text"]);
        assert_eq!(error.details[0].message, "must not be blank");
        assert!(store.call(&team, &call.id).await.unwrap().transcript.is_empty());
        assert_eq!(searched_calls(&store, &team, "fine").await, Vec::<String>::new());

        let error = store.append_transcript(&team, "c1", Vec::new()).await.unwrap_err();
        assert_eq!(fields(&error), ["segments"]);
        assert_eq!(error.details[0].message, "must be an integer from 1 to 1000");
        let too_many: Vec<_> = (0..1001).map(|seq| segment(seq, "x", 0)).collect();
        assert_eq!(fields(&store.append_transcript(&team, "c1", too_many).await.unwrap_err()), ["segments"]);

        // The largest batch goes in whole.
        let most: Vec<_> = (0..1000).map(|seq| segment(seq, &format!("segment {seq}"), seq * 10)).collect();
        let appended = store.append_transcript(&team, "c1", most).await.unwrap();
        assert_eq!((appended.appended, appended.total), (1000, 1000));
    })
    .await;
}

#[tokio::test]
async fn unknown_calls_are_not_found() {
    on_every_engine(|store| async move {
        let team = team();
        let not_found = |error: ServiceError| assert_eq!(error.kind, ErrorKind::NotFound, "{error}");
        not_found(store.append_transcript(&team, "nope", vec![segment(0, "hi", 0)]).await.unwrap_err());
        let event = NewEvent { kind: "answered".into(), at_ms: 1, data: "{}".into() };
        not_found(store.add_call_event(&team, "nope", event).await.unwrap_err());
        not_found(store.end_call(&team, "nope", end(5, None)).await.unwrap_err());
        let recording = RecordingMeta { object_key: "k".into(), content_type: "audio/wav".into(), size_bytes: 1 };
        not_found(store.set_recording(&team, "nope", recording).await.unwrap_err());
        not_found(store.call_by_external_id(&team, "nope").await.unwrap_err());
        not_found(store.call(&team, &uuid::Uuid::new_v4().to_string()).await.unwrap_err());
        assert_eq!(fields(&store.call(&team, "not-a-uuid").await.unwrap_err()), ["callId"]);
        assert_eq!(fields(&store.call("nope", &team).await.unwrap_err()), ["teamId"]);
    })
    .await;
}

#[tokio::test]
async fn invalid_calls_are_refused_with_every_field() {
    on_every_engine(|store| async move {
        let team = team();
        let error = store
            .upsert_call(
                &team,
                NewCall {
                    external_id: String::new(),
                    agent_id: Some("agent".into()),
                    status: "s".repeat(51),
                    ..new_call("x", 0)
                },
            )
            .await
            .unwrap_err();
        assert_eq!(fields(&error), ["externalId", "agentId", "status"]);
        store.upsert_call(&team, new_call("c1", 10_000)).await.unwrap();
        let error = store
            .end_call(&team, "c1", CallEnd::plain(20_000, String::new(), Some("s".repeat(20_001)), Some(f64::NAN)))
            .await
            .unwrap_err();
        assert_eq!(fields(&error), ["status", "summary", "score"]);
        let bad_event = NewEvent { kind: String::new(), at_ms: 0, data: "d".repeat(65_537) };
        assert_eq!(fields(&store.add_call_event(&team, "c1", bad_event).await.unwrap_err()), ["type", "data"]);
    })
    .await;
}

#[tokio::test]
async fn events_form_the_timeline_in_time_order() {
    on_every_engine(|store| async move {
        let team = team();
        let call = store.upsert_call(&team, new_call("c1", 1_000)).await.unwrap();
        let event = |kind: &str, at_ms: i64, data: &str| NewEvent { kind: kind.into(), at_ms, data: data.into() };
        let added = store.add_call_event(&team, "c1", event("transferred", 3_000, r#"{ "to": "+1" }"#)).await.unwrap();
        assert_eq!(added.data, r#"{"to":"+1"}"#);
        store.add_call_event(&team, "c1", event("answered", 2_000, "{}")).await.unwrap();
        store.add_call_event(&team, "c1", event("dtmf", 3_000, r#"{"digit":"1"}"#)).await.unwrap();
        // The same event again is not a second event.
        store.add_call_event(&team, "c1", event("answered", 2_000, "{ }")).await.unwrap();
        for data in ["[1]", "\"text\"", "{", "7"] {
            let error = store.add_call_event(&team, "c1", event("x", 1, data)).await.unwrap_err();
            assert_eq!(fields(&error), ["data"], "{data}");
            assert_eq!(error.details[0].message, "must be a JSON object");
        }
        let timeline: Vec<_> =
            store.call(&team, &call.id).await.unwrap().timeline.into_iter().map(|e| (e.r#type, e.at_ms)).collect();
        assert_eq!(
            timeline,
            [("answered".to_owned(), 2_000), ("transferred".to_owned(), 3_000), ("dtmf".to_owned(), 3_000)]
        );
    })
    .await;
}

#[tokio::test]
async fn ending_a_call_sets_its_duration_once() {
    on_every_engine(|store| async move {
        let team = team();
        store.upsert_call(&team, new_call("c1", 10_000)).await.unwrap();
        let error = store.end_call(&team, "c1", end(9_999, None)).await.unwrap_err();
        assert_eq!(fields(&error), ["endedAt"]);

        let ended = store
            .end_call(&team, "c1", CallEnd { score: Some(0.75), ..end(71_999, Some("Asked about pricing")) })
            .await
            .unwrap();
        assert_eq!(
            (ended.ended_at_ms, ended.duration_seconds, ended.status.as_str()),
            (Some(71_999), Some(61), "completed")
        );
        assert_eq!((ended.summary.as_deref(), ended.score), (Some("Asked about pricing"), Some(0.75)));
        tick().await;
        // Again, without summary or score: they are kept, and nothing is written.
        let again = store.end_call(&team, "c1", end(71_999, None)).await.unwrap();
        assert_eq!(again, ended);
        assert_eq!(searched_calls(&store, &team, "PRICING").await, ["c1"]);

        let summary_changed = store.end_call(&team, "c1", end(72_000, Some("Booked a demo"))).await.unwrap();
        assert_eq!(summary_changed.duration_seconds, Some(62));
        assert_eq!(searched_calls(&store, &team, "pricing").await, Vec::<String>::new());
        assert_eq!(searched_calls(&store, &team, "demo").await, ["c1"]);
        // A start after the end is refused; an earlier one moves the duration.
        let late = store.upsert_call(&team, new_call("c1", 80_000)).await.unwrap_err();
        assert_eq!(fields(&late), ["startedAt"]);
        let earlier = store.upsert_call(&team, new_call("c1", 2_000)).await.unwrap();
        assert_eq!(earlier.duration_seconds, Some(70));
        // A retried report of the call in progress does not reopen the ended call.
        let retried = store.upsert_call(&team, new_call("c1", 2_000)).await.unwrap();
        assert_eq!((retried.status.as_str(), retried.ended_at_ms), ("completed", Some(72_000)));
    })
    .await;
}

#[tokio::test]
async fn calls_ended_without_a_score_and_then_with_one() {
    on_every_engine(|store| async move {
        let team = team();
        // Unscored first: the statement a connection prepares then must still take a score.
        for n in 0..4 {
            let (unscored, scored) = (format!("u{n}"), format!("s{n}"));
            store.upsert_call(&team, new_call(&unscored, 1_000)).await.unwrap();
            assert_eq!(store.end_call(&team, &unscored, end(5_000, None)).await.unwrap().score, None);
            store.upsert_call(&team, new_call(&scored, 1_000)).await.unwrap();
            let ended = store.end_call(&team, &scored, CallEnd { score: Some(0.5), ..end(5_000, None) }).await;
            assert_eq!(ended.unwrap().score, Some(0.5));
        }
    })
    .await;
}

#[tokio::test]
async fn recordings_and_flags() {
    on_every_engine(|store| async move {
        let team = team();
        let call = store.upsert_call(&team, new_call("c1", 1_000)).await.unwrap();
        let meta = |key: &str, size| RecordingMeta {
            object_key: key.into(),
            content_type: "audio/wav".into(),
            size_bytes: size,
        };
        assert_eq!(store.set_recording(&team, "c1", meta("a", 10)).await.unwrap(), None);
        // The same object rewritten is not a previous one to delete.
        assert_eq!(store.set_recording(&team, "c1", meta("a", 12)).await.unwrap(), None);
        assert_eq!(store.set_recording(&team, "c1", meta("b", 20)).await.unwrap(), Some(meta("a", 12)));
        let recording = store.call(&team, &call.id).await.unwrap().recording.unwrap();
        assert_eq!(
            (recording.object_key.as_str(), recording.size_bytes, recording.content_type.as_str()),
            ("b", 20, "audio/wav")
        );

        let flagged = store
            .update_call_flags(&team, &call.id, CallFlags { flagged: Some(true), ..CallFlags::default() })
            .await
            .unwrap();
        assert_eq!((flagged.flagged, flagged.favorite, flagged.spam), (true, false, false));
        tick().await;
        let same = store
            .update_call_flags(&team, &call.id, CallFlags { flagged: Some(true), favorite: Some(false), spam: None })
            .await
            .unwrap();
        assert_eq!(same.updated_at_ms, flagged.updated_at_ms);
        let both = store
            .update_call_flags(
                &team,
                &call.id,
                CallFlags { favorite: Some(true), spam: Some(true), ..CallFlags::default() },
            )
            .await
            .unwrap();
        assert_eq!((both.flagged, both.favorite, both.spam), (true, true, true));
    })
    .await;
}

/// Three calls from 1:00 to 3:00 (ms since epoch scaled down), ended or not, for filters.
async fn filter_fixture(store: &ConversationStore, team: &str, agent: &str) {
    let calls = [
        ("short-in", 1_000, Direction::Incoming, Some(agent), "+14155550001", Some(30_999)),
        ("long-out", 2_000, Direction::Outgoing, None, "+14155550002", Some(302_000)),
        ("live-in", 3_000, Direction::Incoming, Some(agent), "+14155550003", None),
    ];
    for (external_id, started, direction, agent_id, from, ended) in calls {
        let new = NewCall {
            direction,
            agent_id: agent_id.map(str::to_owned),
            from: from.into(),
            ..new_call(external_id, started)
        };
        store.upsert_call(team, new).await.unwrap();
        if let Some(ended) = ended {
            store.end_call(team, external_id, end(ended, None)).await.unwrap();
        }
    }
}

#[tokio::test]
async fn every_call_filter() {
    on_every_engine(|store| async move {
        let (team, agent) = (team(), uuid::Uuid::new_v4().to_string());
        filter_fixture(&store, &team, &agent).await;
        let list = |filter: CallFilter| listed_calls(&store, &team, filter);
        assert_eq!(list(calls_filter()).await, ["short-in", "long-out", "live-in"]);
        assert_eq!(
            list(CallFilter { direction: Some(Direction::Incoming), ..calls_filter() }).await,
            ["short-in", "live-in"]
        );
        assert_eq!(list(CallFilter { direction: Some(Direction::Outgoing), ..calls_filter() }).await, ["long-out"]);
        assert_eq!(list(CallFilter { agent_id: Some(agent.clone()), ..calls_filter() }).await, ["short-in", "live-in"]);
        let nobody = uuid::Uuid::new_v4().to_string();
        assert!(list(CallFilter { agent_id: Some(nobody), ..calls_filter() }).await.is_empty());
        // Durations: 29 s and 300 s; the live call has none and matches no duration filter.
        assert_eq!(list(CallFilter { min_duration: Some(29), ..calls_filter() }).await, ["short-in", "long-out"]);
        assert_eq!(list(CallFilter { min_duration: Some(30), ..calls_filter() }).await, ["long-out"]);
        assert_eq!(list(CallFilter { max_duration: Some(29), ..calls_filter() }).await, ["short-in"]);
        assert_eq!(list(CallFilter { max_duration: Some(0), ..calls_filter() }).await, Vec::<String>::new());
        let exactly = CallFilter { min_duration: Some(300), max_duration: Some(300), ..calls_filter() };
        assert_eq!(list(exactly).await, ["long-out"]);
        let created = CallFilter { created_from_ms: Some(2_000), created_to_ms: Some(3_000), ..calls_filter() };
        assert_eq!(list(created).await, ["long-out", "live-in"]);
        assert_eq!(list(CallFilter { created_to_ms: Some(1_999), ..calls_filter() }).await, ["short-in"]);
        // Either party, exactly.
        assert_eq!(list(CallFilter { number: Some("+14155550002".into()), ..calls_filter() }).await, ["long-out"]);
        assert_eq!(list(CallFilter { number: Some(LINE.into()), ..calls_filter() }).await.len(), 3);
        assert!(list(CallFilter { number: Some("+1415555000".into()), ..calls_filter() }).await.is_empty());
        let combined = CallFilter {
            direction: Some(Direction::Incoming),
            agent_id: Some(agent.clone()),
            min_duration: Some(1),
            number: Some("+14155550001".into()),
            search: Some("0001".into()),
            ..calls_filter()
        };
        assert_eq!(list(combined).await, ["short-in"]);

        let (page, info) = store.list_calls(&team, &CallFilter { limit: 2, page: 2, ..calls_filter() }).await.unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!((info.page, info.limit, info.total_count, info.total_pages), (2, 2, 3, 2));
        let (empty, info) = store.list_calls(&team, &CallFilter { page: 9, ..calls_filter() }).await.unwrap();
        assert!(empty.is_empty());
        assert_eq!((info.total_count, info.total_pages), (3, 1));
        let (_, info) = store.list_calls(&uuid::Uuid::new_v4().to_string(), &calls_filter()).await.unwrap();
        assert_eq!((info.total_count, info.total_pages), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn invalid_call_filters_name_their_fields() {
    on_every_engine(|store| async move {
        let filter = CallFilter {
            page: 0,
            limit: 101,
            search: Some("s".repeat(201)),
            agent_id: Some("agent".into()),
            min_duration: Some(-1),
            max_duration: Some(31_536_001),
            ..calls_filter()
        };
        let error = store.list_calls(&team(), &filter).await.unwrap_err();
        assert_eq!(fields(&error), ["page", "limit", "search", "agentId", "minDuration", "maxDuration"]);
        let inverted = CallFilter { min_duration: Some(10), max_duration: Some(9), ..calls_filter() };
        assert_eq!(fields(&store.list_calls(&team(), &inverted).await.unwrap_err()), ["minDuration"]);
        let blank = CallFilter { search: Some("  ".into()), ..calls_filter() };
        assert_eq!(store.list_calls(&team(), &blank).await.unwrap_err().details[0].message, "must not be blank");
    })
    .await;
}

/// `(external_id, started, duration in s)`: ties in every key, some calls still going on.
const SORT_FIXTURE: [(&str, i64, Option<i64>); 8] = [
    ("a", 1_000, Some(10)),
    ("b", 1_000, Some(10)),
    ("c", 1_000, None),
    ("d", 2_000, Some(5)),
    ("e", 2_000, None),
    ("f", 3_000, Some(10)),
    ("g", 4_000, Some(0)),
    ("h", 1_000, Some(5)),
];

/// The order a sort must give: by key then id, both in the direction; no key last, by id.
fn expected_order(calls: &[Call], sort: CallSort, ascending: bool) -> Vec<String> {
    let key = |call: &Call| match sort {
        CallSort::CreatedAt => Some(call.started_at_ms),
        CallSort::Duration => call.duration_seconds,
        CallSort::EndedAt => call.ended_at_ms,
    };
    let mut keyed: Vec<&Call> = calls.iter().filter(|call| key(call).is_some()).collect();
    let mut unkeyed: Vec<&Call> = calls.iter().filter(|call| key(call).is_none()).collect();
    keyed.sort_by(|x, y| (key(x), &x.id).cmp(&(key(y), &y.id)));
    unkeyed.sort_by(|x, y| x.id.cmp(&y.id));
    if !ascending {
        keyed.reverse();
        unkeyed.reverse();
    }
    keyed.into_iter().chain(unkeyed).map(|call| call.external_id.clone()).collect()
}

#[tokio::test]
async fn calls_sort_by_every_key_both_ways_and_page_without_loss() {
    on_every_engine(|store| async move {
        let team = team();
        let mut calls = Vec::new();
        for (external_id, started, duration) in SORT_FIXTURE {
            store.upsert_call(&team, new_call(external_id, started)).await.unwrap();
            let call = match duration {
                // Ends are tied where the duration and start are: a, b (11 000) and f vs d.
                Some(seconds) => store.end_call(&team, external_id, end(started + seconds * 1000, None)).await.unwrap(),
                None => store.call_by_external_id(&team, external_id).await.unwrap(),
            };
            calls.push(call);
        }
        for sort in [CallSort::CreatedAt, CallSort::Duration, CallSort::EndedAt] {
            for ascending in [true, false] {
                for limit in [1, 3, 8] {
                    let mut seen = Vec::new();
                    for page in 1..=8u32.div_ceil(limit) + 1 {
                        let filter = CallFilter { page, limit, sort, ascending, ..calls_filter() };
                        let (items, info) = store.list_calls(&team, &filter).await.unwrap();
                        assert_eq!((info.total_count, info.total_pages), (8, 8u32.div_ceil(limit)));
                        seen.extend(items.into_iter().map(|call| call.external_id));
                    }
                    assert_eq!(
                        seen,
                        expected_order(&calls, sort, ascending),
                        "{sort:?} ascending={ascending} limit={limit}"
                    );
                }
            }
        }
        // With a duration filter the calls without one are out, whatever the sort.
        let filter = CallFilter {
            min_duration: Some(0),
            sort: CallSort::EndedAt,
            ascending: false,
            limit: 2,
            page: 4,
            ..calls_filter()
        };
        let (items, info) = store.list_calls(&team, &filter).await.unwrap();
        assert_eq!((items.len(), info.total_count), (0, 6));
    })
    .await;
}

#[tokio::test]
async fn search_finds_numbers_transcripts_and_summaries() {
    on_every_engine(|store| async move {
        let (team, other) = (team(), team());
        store.upsert_call(&team, new_call("zurich", 1_000)).await.unwrap();
        store.append_transcript(&team, "zurich", vec![segment(0, "We fly to Zürich tomorrow", 0)]).await.unwrap();
        store.end_call(&team, "zurich", end(5_000, Some("Customer asked about the REFUND policy"))).await.unwrap();
        let london = NewCall { from: "+442079460018".into(), to: "+442079460019".into(), ..new_call("london", 2_000) };
        store.upsert_call(&team, london).await.unwrap();
        let texts = [segment(0, "I am 100% sure_thing", 0), segment(1, "he said \"hello\" twice", 10)];
        store.append_transcript(&team, "london", texts.to_vec()).await.unwrap();
        // Another team's call says the same things and is never found.
        store.upsert_call(&other, new_call("theirs", 1_000)).await.unwrap();
        store.append_transcript(&other, "theirs", vec![segment(0, "Zürich refund 100% sure_thing", 0)]).await.unwrap();

        let search = |query: &'static str| searched_calls(&store, &team, query);
        assert_eq!(search("5552671").await, ["zurich"]);
        assert_eq!(search("+1415").await, ["zurich"]);
        assert_eq!(search("2079460019").await, ["london"]);
        assert_eq!(search("zürich").await, ["zurich"]);
        assert_eq!(search("ZÜRICH").await, ["zurich"]);
        assert_eq!(search("  fly to ZÜ ").await, ["zurich"]);
        assert_eq!(search("refund").await, ["zurich"]);
        assert_eq!(search("tomorrow customer").await, Vec::<String>::new());
        assert_eq!(search("100%").await, ["london"]);
        assert_eq!(search("e_t").await, ["london"]);
        assert_eq!(search("0_0").await, Vec::<String>::new());
        assert_eq!(search("\"hello\"").await, ["london"]);
        assert_eq!(search("nowhere").await, Vec::<String>::new());
        // Fewer than 3 characters: not indexed, still right.
        assert_eq!(search("ü").await, ["zurich"]);
        assert_eq!(search("Zü").await, ["zurich"]);
        assert_eq!(search("%").await, ["london"]);
        assert_eq!(search("44").await, ["london"]);
        assert_eq!(search("_").await, ["london"]);
        assert_eq!(search("a").await, ["zurich", "london"]);
        assert_eq!(searched_calls(&store, &other, "refund").await, ["theirs"]);
        let (_, info) = store
            .list_calls(&team, &CallFilter { search: Some("a".into()), limit: 1, ..calls_filter() })
            .await
            .unwrap();
        assert_eq!((info.total_count, info.total_pages), (2, 2));
    })
    .await;
}

/// A search matching more calls than a list counts exactly: on PostgreSQL its total is
/// counted to 1,000 and estimated beyond, flagged, and exact again once a page shows the end;
/// the pages themselves are exact. SQLite counts every match.
#[tokio::test]
async fn frequent_searches_count_to_a_thousand_and_page_exactly() {
    on_every_engine(|store| async move {
        let mut dice = Dice(0x2545_f491_4f6c_dd1d);
        let (team, other) = (team(), team());
        let agents = [uuid::Uuid::new_v4().to_string()];
        seed_calls(&store, (std::slice::from_ref(&team), &agents), 1_200, Some("quokka"), &mut dice).await;
        seed_calls(&store, (std::slice::from_ref(&other), &agents), 30, Some("quokka"), &mut dice).await;
        let postgres = store.db().engine() == Engine::Postgres;
        let everything = CallFilter { limit: 100, ..calls_filter() };
        let searched = CallFilter { search: Some("QUOKKA".into()), ..everything.clone() };

        let (calls, page) = store.list_calls(&team, &searched).await.unwrap();
        let unsearched = store.list_calls(&team, &everything).await.unwrap().0;
        let ids = |calls: &[Call]| calls.iter().map(|call| call.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&calls), ids(&unsearched), "every call says it: the same first page");
        if postgres {
            assert!(page.total_count_estimated, "{page:?}");
            assert!(page.total_count > 1_000, "{page:?}");
        } else {
            assert_eq!((page.total_count, page.total_count_estimated), (1_200, false));
        }

        let middle = CallFilter { page: 7, ..searched.clone() };
        let unsearched = store.list_calls(&team, &CallFilter { page: 7, ..everything.clone() }).await.unwrap().0;
        assert_eq!(ids(&store.list_calls(&team, &middle).await.unwrap().0), ids(&unsearched));

        // 1,200 calls in pages of 70: the 18th holds the last 10, so the total is known.
        let last = CallFilter { page: 18, limit: 70, ..searched.clone() };
        let (calls, page) = store.list_calls(&team, &last).await.unwrap();
        assert_eq!((calls.len(), page.total_count, page.total_count_estimated), (10, 1_200, false));

        // Fewer than 1,001 matches once the other filters apply: counted exactly.
        let incoming = CallFilter { direction: Some(Direction::Incoming), ..searched.clone() };
        let (_, page) = store.list_calls(&team, &incoming).await.unwrap();
        let all_incoming = CallFilter { direction: Some(Direction::Incoming), ..everything.clone() };
        let (_, expected) = store.list_calls(&team, &all_incoming).await.unwrap();
        assert!(expected.total_count < 1_000, "{expected:?}");
        assert_eq!((page.total_count, page.total_count_estimated), (expected.total_count, false));

        let (calls, page) = store.list_calls(&other, &searched).await.unwrap();
        assert_eq!((calls.len(), page.total_count, page.total_count_estimated), (30, 30, false));
    })
    .await;
}

/// A frequent word said once per call (PostgreSQL reads 2,000 of its matches to find it
/// frequent): whether those matches settle the count or the whole search is counted, the
/// totals are the same as the unsearched list's.
#[tokio::test]
async fn frequent_searches_count_the_same_whatever_the_other_filters() {
    on_every_engine(|store| async move {
        let mut dice = Dice(0x1234_5678_9abc_def1);
        let team = team();
        let agents = [uuid::Uuid::new_v4().to_string()];
        seed_calls(&store, (std::slice::from_ref(&team), &agents), 2_400, Some("wombat"), &mut dice).await;
        // Only the transcripts say it: one search row per call.
        sqlx::query("DELETE FROM call_search WHERE team_id = $1 AND source = 'meta'")
            .bind(team.clone())
            .execute(store.db().pool())
            .await
            .unwrap();
        if store.db().engine() == Engine::Postgres {
            sqlx::query("ANALYZE").execute(store.db().pool()).await.unwrap();
        }
        for narrower in [
            calls_filter(),
            CallFilter { direction: Some(Direction::Incoming), ..calls_filter() },
            CallFilter { direction: Some(Direction::Outgoing), sort: CallSort::Duration, ..calls_filter() },
            CallFilter { min_duration: Some(400), ..calls_filter() },
            CallFilter { min_duration: Some(590), ..calls_filter() },
        ] {
            let everything = CallFilter { limit: 50, ..narrower };
            let (unsearched, expected) = store.list_calls(&team, &everything).await.unwrap();
            let searched = CallFilter { search: Some("wombat".into()), ..everything.clone() };
            let (calls, page) = store.list_calls(&team, &searched).await.unwrap();
            let ids = |calls: &[Call]| calls.iter().map(|call| call.id.clone()).collect::<Vec<_>>();
            assert_eq!(ids(&calls), ids(&unsearched), "{searched:?}");
            if expected.total_count > 1_000 && store.db().engine() == Engine::Postgres {
                assert!(page.total_count_estimated && page.total_count > 1_000, "{searched:?}: {page:?}");
            } else {
                let exact = (expected.total_count, false);
                assert_eq!((page.total_count, page.total_count_estimated), exact, "{searched:?}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn another_teams_call_is_not_found() {
    on_every_engine(|store| async move {
        let (mine, theirs) = (team(), team());
        let secret = store.upsert_call(&theirs, new_call("shared-id", 1_000)).await.unwrap();
        let not_found = |error: ServiceError| assert_eq!(error.kind, ErrorKind::NotFound, "{error}");
        not_found(store.call(&mine, &secret.id).await.unwrap_err());
        not_found(store.call_by_external_id(&mine, "shared-id").await.unwrap_err());
        not_found(store.update_call_flags(&mine, &secret.id, CallFlags::default()).await.unwrap_err());
        not_found(store.delete_call(&mine, &secret.id).await.unwrap_err());
        not_found(store.append_transcript(&mine, "shared-id", vec![segment(0, "x", 0)]).await.unwrap_err());
        not_found(store.end_call(&mine, "shared-id", end(2_000, None)).await.unwrap_err());
        assert!(listed_calls(&store, &mine, calls_filter()).await.is_empty());
        assert!(searched_calls(&store, &mine, "5552671").await.is_empty());
        // The same external id in my team is another call.
        let own = store.upsert_call(&mine, new_call("shared-id", 5_000)).await.unwrap();
        assert_ne!(own.id, secret.id);
        assert_eq!(store.call(&theirs, &secret.id).await.unwrap().started_at_ms, 1_000);
    })
    .await;
}

#[tokio::test]
async fn deleting_a_call_removes_everything() {
    on_every_engine(|store| async move {
        let team = team();
        let call = store.upsert_call(&team, new_call("c1", 1_000)).await.unwrap();
        store.append_transcript(&team, "c1", vec![segment(0, "Zürich once", 0)]).await.unwrap();
        store.append_transcript(&team, "c1", vec![segment(1, "Zürich twice", 10)]).await.unwrap();
        store
            .add_call_event(&team, "c1", NewEvent { kind: "answered".into(), at_ms: 1, data: "{}".into() })
            .await
            .unwrap();
        store.end_call(&team, "c1", end(9_000, Some("a summary"))).await.unwrap();
        let recording = RecordingMeta { object_key: "rec/c1".into(), content_type: "audio/ogg".into(), size_bytes: 3 };
        store.set_recording(&team, "c1", recording).await.unwrap();
        let survivor = store.upsert_call(&team, new_call("c2", 2_000)).await.unwrap();
        store.append_transcript(&team, "c2", vec![segment(0, "Zürich stays", 0)]).await.unwrap();

        let deleted = store.delete_call(&team, &call.id).await.unwrap();
        assert_eq!(deleted.recording.unwrap().object_key, "rec/c1");
        assert_eq!((deleted.transcript.len(), deleted.timeline.len()), (2, 1));
        assert_eq!(store.call(&team, &call.id).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(store.delete_call(&team, &call.id).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(searched_calls(&store, &team, "zürich").await, ["c2"]);
        assert!(searched_calls(&store, &team, "summary").await.is_empty());
        for table in ["call_segments", "call_events", "call_search"] {
            let sql = format!("SELECT COUNT(*) FROM {table} WHERE call_id = $1");
            assert_eq!(rows(&store, &sql, &call.id).await, 0, "{table}");
        }
        if store.db().engine() == Engine::Sqlite {
            // The trigram index forgot the deleted rows too.
            let sql = "SELECT COUNT(*) FROM call_search_fts WHERE call_search_fts MATCH $1";
            assert_eq!(rows(&store, sql, "\"zürich\"").await, 1);
        }
        // A call with the same external id starts afresh.
        let again = store.upsert_call(&team, new_call("c1", 1_000)).await.unwrap();
        assert!(again.transcript.is_empty() && again.recording.is_none() && again.summary.is_none());
        assert_eq!(store.call(&team, &survivor.id).await.unwrap().transcript.len(), 1);
    })
    .await;
}

#[tokio::test]
async fn upserting_the_same_chat_twice_changes_nothing() {
    on_every_engine(|store| async move {
        let team = team();
        let new = NewChat {
            contact_number: Some(CALLER.into()),
            contact_email: Some("ann@example.com".into()),
            ..new_chat("h1", 1_000)
        };
        let first = store.upsert_chat(&team, new.clone()).await.unwrap();
        assert_eq!((first.status.as_str(), first.channel.as_str(), first.message_count), ("active", "web", 0));
        assert_eq!((first.last_message_at_ms, first.ended_at_ms, first.created_at_ms), (None, None, 1_000));
        tick().await;
        assert_eq!(store.upsert_chat(&team, new.clone()).await.unwrap(), first);
        // Absent contact details keep the stored ones.
        assert_eq!(store.upsert_chat(&team, new_chat("h1", 1_000)).await.unwrap(), first);
        let moved = store.upsert_chat(&team, NewChat { channel: Channel::Whatsapp, ..new }).await.unwrap();
        assert_eq!((moved.id.as_str(), moved.channel.as_str()), (first.id.as_str(), "whatsapp"));
        assert!(moved.updated_at_ms > first.updated_at_ms);
        assert_eq!(store.chat_by_external_id(&team, "h1").await.unwrap(), moved);

        let error = store
            .upsert_chat(
                &team,
                NewChat {
                    agent_id: Some("agent".into()),
                    contact_email: Some(format!("{}@example.com", "a".repeat(250))),
                    ..new_chat("", 0)
                },
            )
            .await
            .unwrap_err();
        assert_eq!(fields(&error), ["externalId", "agentId", "contactEmail"]);
    })
    .await;
}

#[tokio::test]
async fn chat_messages_are_appended_once_and_paged_back() {
    on_every_engine(|store| async move {
        let team = team();
        let chat = store.upsert_chat(&team, new_chat("h1", 500)).await.unwrap();
        let first = store
            .append_chat_messages(
                &team,
                "h1",
                vec![message("m1", "hello", 1_000), message("m2", "third", 3_000), message("m3", "second", 2_000)],
            )
            .await
            .unwrap();
        assert_eq!((first.appended, first.total), (3, 3));
        let again = store
            .append_chat_messages(
                &team,
                "h1",
                vec![message("m2", "changed", 9_000), message("m4", "fourth", 3_000), message("m4", "x", 1)],
            )
            .await
            .unwrap();
        assert_eq!((again.appended, again.total), (1, 4));
        let read = store.chat(&team, &chat.id, 100, None).await.unwrap();
        assert_eq!((read.message_count, read.last_message_at_ms), (4, Some(3_000)));
        let order: Vec<_> = read.messages.iter().map(|m| m.external_id.as_str()).collect();
        assert_eq!(order, ["m1", "m3", "m2", "m4"]);
        assert_eq!(read.messages[2].text, "third");

        let newest = store.chat(&team, &chat.id, 2, None).await.unwrap().messages;
        assert_eq!(newest.iter().map(|m| m.external_id.as_str()).collect::<Vec<_>>(), ["m2", "m4"]);
        let older = store.chat(&team, &chat.id, 2, Some(&newest[0].id)).await.unwrap().messages;
        assert_eq!(older.iter().map(|m| m.external_id.as_str()).collect::<Vec<_>>(), ["m1", "m3"]);
        assert!(store.chat(&team, &chat.id, 2, Some(&older[0].id)).await.unwrap().messages.is_empty());

        let other = store.upsert_chat(&team, new_chat("h2", 500)).await.unwrap();
        for before in [uuid::Uuid::new_v4().to_string(), "nope".to_owned(), newest[0].id.clone()] {
            let error = store.chat(&team, &other.id, 2, Some(&before)).await.unwrap_err();
            assert_eq!(fields(&error), ["messagesBefore"]);
        }
        assert_eq!(fields(&store.chat(&team, &chat.id, 0, None).await.unwrap_err()), ["messagesLimit"]);
        assert!(store.chat_by_external_id(&team, "h1").await.unwrap().messages.is_empty());

        let error = store
            .append_chat_messages(&team, "h1", vec![message("m9", "fine", 1), message("", "", 1)])
            .await
            .unwrap_err();
        assert_eq!(fields(&error), ["messages[1].externalId", "messages[1].text"]);
        assert_eq!(store.chat(&team, &chat.id, 100, None).await.unwrap().message_count, 4);
        let error = store.append_chat_messages(&team, "nope", vec![message("m9", "fine", 1)]).await.unwrap_err();
        assert_eq!(error.kind, ErrorKind::NotFound);
    })
    .await;
}

#[tokio::test]
async fn ended_chats_still_take_messages() {
    on_every_engine(|store| async move {
        let team = team();
        store.upsert_chat(&team, new_chat("h1", 1_000)).await.unwrap();
        assert_eq!(
            fields(&store.end_chat(&team, "h1", ChatEnd { ended_at_ms: 999, summary: None }).await.unwrap_err()),
            ["endedAt"]
        );
        let ended =
            store.end_chat(&team, "h1", ChatEnd { ended_at_ms: 5_000, summary: Some("done".into()) }).await.unwrap();
        assert_eq!(
            (ended.status.as_str(), ended.ended_at_ms, ended.summary.as_deref()),
            ("ended", Some(5_000), Some("done"))
        );
        tick().await;
        assert_eq!(store.end_chat(&team, "h1", ChatEnd { ended_at_ms: 5_000, summary: None }).await.unwrap(), ended);
        let appended = store.append_chat_messages(&team, "h1", vec![message("late", "one more", 6_000)]).await.unwrap();
        assert_eq!((appended.appended, appended.total), (1, 1));
        let chat = store.chat_by_external_id(&team, "h1").await.unwrap();
        assert_eq!((chat.status.as_str(), chat.last_message_at_ms), ("ended", Some(6_000)));
    })
    .await;
}

#[tokio::test]
async fn every_chat_filter_and_sort() {
    on_every_engine(|store| async move {
        let (team, agent) = (team(), uuid::Uuid::new_v4().to_string());
        // (external id, started, channel, agent, last message, ended)
        let chats = [
            ("web-1", 1_000, Channel::Web, true, Some(5_000), false),
            ("wa-1", 1_000, Channel::Whatsapp, false, None, true),
            ("web-2", 2_000, Channel::Web, false, Some(5_000), false),
            ("widget", 3_000, Channel::VoiceWidget, true, Some(4_000), true),
            ("quiet", 3_000, Channel::WebAgent, false, None, false),
        ];
        let mut stored: Vec<Chat> = Vec::new();
        for (external_id, started, channel, with_agent, last, ended) in chats {
            let new =
                NewChat { channel, agent_id: with_agent.then(|| agent.clone()), ..new_chat(external_id, started) };
            store.upsert_chat(&team, new).await.unwrap();
            if let Some(at) = last {
                store.append_chat_messages(&team, external_id, vec![message("m", "hi", at)]).await.unwrap();
            }
            if ended {
                store.end_chat(&team, external_id, ChatEnd { ended_at_ms: 9_000, summary: None }).await.unwrap();
            }
            stored.push(store.chat_by_external_id(&team, external_id).await.unwrap());
        }
        let list = |filter: ChatFilter| {
            let store = store.clone();
            let team = team.clone();
            async move {
                let (chats, _) = store.list_chats(&team, &filter).await.unwrap();
                chats.into_iter().map(|chat| chat.external_id).collect::<Vec<_>>()
            }
        };
        assert_eq!(list(ChatFilter { channel: Some(Channel::Web), ..chats_filter() }).await, ["web-1", "web-2"]);
        assert_eq!(list(ChatFilter { agent_id: Some(agent.clone()), ..chats_filter() }).await, ["web-1", "widget"]);
        assert_eq!(list(ChatFilter { status: Some(ChatStatus::Ended), ..chats_filter() }).await, ["wa-1", "widget"]);
        assert_eq!(
            list(ChatFilter { status: Some(ChatStatus::Active), ..chats_filter() }).await,
            ["web-1", "web-2", "quiet"]
        );
        let created = ChatFilter { created_from_ms: Some(2_000), created_to_ms: Some(2_000), ..chats_filter() };
        assert_eq!(list(created).await, ["web-2"]);
        let error =
            store.list_chats(&team, &ChatFilter { limit: 0, agent_id: Some("x".into()), ..chats_filter() }).await;
        assert_eq!(fields(&error.unwrap_err()), ["limit", "agentId"]);

        for sort in [ChatSort::CreatedAt, ChatSort::LastMessageAt] {
            for ascending in [true, false] {
                let key = |chat: &Chat| match sort {
                    ChatSort::CreatedAt => Some(chat.created_at_ms),
                    ChatSort::LastMessageAt => chat.last_message_at_ms,
                };
                let mut keyed: Vec<&Chat> = stored.iter().filter(|c| key(c).is_some()).collect();
                let mut unkeyed: Vec<&Chat> = stored.iter().filter(|c| key(c).is_none()).collect();
                keyed.sort_by(|x, y| (key(x), &x.id).cmp(&(key(y), &y.id)));
                unkeyed.sort_by(|x, y| x.id.cmp(&y.id));
                if !ascending {
                    keyed.reverse();
                    unkeyed.reverse();
                }
                let expected: Vec<String> = keyed.into_iter().chain(unkeyed).map(|c| c.external_id.clone()).collect();
                let mut seen = Vec::new();
                for page in 1..=3 {
                    seen.extend(list(ChatFilter { page, limit: 2, sort, ascending, ..chats_filter() }).await);
                }
                assert_eq!(seen, expected, "{sort:?} ascending={ascending}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn chat_search_and_other_teams() {
    on_every_engine(|store| async move {
        let (team, other) = (team(), team());
        let contact = NewChat {
            contact_number: Some(CALLER.into()),
            contact_email: Some("ann@example.com".into()),
            ..new_chat("h1", 1_000)
        };
        let chat = store.upsert_chat(&team, contact).await.unwrap();
        store.append_chat_messages(&team, "h1", vec![message("m1", "Ich wohne in Zürich", 2_000)]).await.unwrap();
        store.upsert_chat(&team, new_chat("h2", 2_000)).await.unwrap();
        store.append_chat_messages(&team, "h2", vec![message("m1", "Where is my order?", 2_000)]).await.unwrap();
        let secret = store
            .upsert_chat(&other, NewChat { contact_email: Some("ann@example.com".into()), ..new_chat("h1", 1_000) })
            .await
            .unwrap();
        store.append_chat_messages(&other, "h1", vec![message("m1", "Zürich ORDER", 2_000)]).await.unwrap();

        assert_eq!(searched_chats(&store, &team, "ZÜRICH").await, ["h1"]);
        assert_eq!(searched_chats(&store, &team, "5552671").await, ["h1"]);
        assert_eq!(searched_chats(&store, &team, "ANN@EXAMPLE").await, ["h1"]);
        assert_eq!(searched_chats(&store, &team, "order").await, ["h2"]);
        assert_eq!(searched_chats(&store, &team, "?").await, ["h2"]);
        assert_eq!(searched_chats(&store, &team, "rz").await, Vec::<String>::new());
        assert_eq!(searched_chats(&store, &other, "order").await, ["h1"]);

        let not_found = |error: ServiceError| assert_eq!(error.kind, ErrorKind::NotFound, "{error}");
        not_found(store.chat(&team, &secret.id, 10, None).await.unwrap_err());
        not_found(store.delete_chat(&team, &secret.id).await.unwrap_err());
        // The same external id names my chat in my team.
        assert_eq!(store.chat_by_external_id(&team, "h1").await.unwrap().id, chat.id);
        not_found(store.chat_by_external_id(&team, "only-theirs").await.unwrap_err());
        store.upsert_chat(&other, new_chat("only-theirs", 1)).await.unwrap();
        not_found(store.chat_by_external_id(&team, "only-theirs").await.unwrap_err());
        not_found(store.end_chat(&team, "only-theirs", ChatEnd { ended_at_ms: 5, summary: None }).await.unwrap_err());

        let deleted = store.delete_chat(&team, &chat.id).await.unwrap();
        assert_eq!(deleted.external_id, "h1");
        not_found(store.chat(&team, &chat.id, 10, None).await.unwrap_err());
        assert!(searched_chats(&store, &team, "zürich").await.is_empty());
        assert!(searched_chats(&store, &team, "ann@").await.is_empty());
        for table in ["chat_messages", "chat_search"] {
            let sql = format!("SELECT COUNT(*) FROM {table} WHERE chat_id = $1");
            assert_eq!(rows(&store, &sql, &chat.id).await, 0, "{table}");
        }
        assert_eq!(searched_chats(&store, &other, "zürich").await, ["h1"]);
    })
    .await;
}

/// A small deterministic generator (xorshift), for benchmark data.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> i64 {
        i64::try_from(self.next() % n).unwrap()
    }

    /// One of 5,000 made-up words (letters drawn with their English frequencies, so that
    /// trigrams spread about as in English); word `i` is about 1/(i+1) as frequent as word 0.
    fn word(&mut self) -> String {
        let rank = (5_000f64.powf((self.below(1_000_000) as f64) / 1_000_000.0)) as u64 - 1;
        let mut letters = Dice(0x2545_f491_4f6c_dd1d ^ (rank + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let length = 3 + letters.below(7);
        (0..length).map(|_| letters.letter()).collect()
    }

    fn letter(&mut self) -> char {
        const LETTERS: &str =
            "eeeeeeeeeeeetttttttttaaaaaaaaoooooooiiiiiiinnnnnnnsssssshhhhhhrrrrrrddddlllluuuccmmwwffggyyppbvkjxqz";
        let index = usize::try_from(self.below(LETTERS.len() as u64)).unwrap();
        char::from(LETTERS.as_bytes()[index])
    }

    fn sentence(&mut self, words: usize) -> String {
        (0..words).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

/// Writes `count` calls of `teams` (round robin) in bulk, shaped as the store writes them:
/// most ended, six transcript segments each, numbers and summary searchable; `said`, when
/// given, ends every summary and segment.
async fn seed_calls(
    store: &ConversationStore,
    (teams, agents): (&[String], &[String]),
    count: usize,
    said: Option<&str>,
    dice: &mut Dice,
) {
    let say = |text: String| match said {
        Some(word) => format!("{text} {word}"),
        None => text,
    };
    const BATCH: usize = 500;
    let mut written = 0;
    while written < count {
        let n = BATCH.min(count - written);
        let mut tx = store.db().begin_write().await.unwrap();
        let mut calls = Vec::with_capacity(n);
        for i in 0..n {
            let index = written + i;
            let team = &teams[index % teams.len()];
            let started = 1_700_000_000_000 + i64::try_from(index).unwrap() * 997 + dice.below(500);
            let ended = (dice.below(10) < 8).then(|| started + dice.below(600_000));
            let from = format!("+1415555{:04}", dice.below(10_000));
            let to = format!("+1650555{:04}", dice.below(5));
            let summary = ended.map(|_| say(dice.sentence(8)));
            let direction = if dice.below(2) == 0 { "INCOMING" } else { "OUTGOING" };
            let agent = agents[usize::try_from(dice.below(agents.len() as u64)).unwrap()].clone();
            let segments: Vec<String> = (0..6).map(|_| say(dice.sentence(12))).collect();
            calls.push((
                uuid::Uuid::now_v7().to_string(),
                team.clone(),
                started,
                ended,
                from,
                to,
                summary,
                direction,
                agent,
                segments,
            ));
        }
        let rows: Vec<String> = (0..n)
            .map(|i| {
                let p = i * 11;
                format!(
                    "(${}, ${}, ${}, ${}, ${}, ${}, ${}, 'completed', ${}, ${}, ${}, ${}, 0, 0, 0, 1, 1)",
                    p + 1,
                    p + 2,
                    p + 3,
                    p + 4,
                    p + 5,
                    p + 6,
                    p + 7,
                    p + 8,
                    p + 9,
                    p + 10,
                    p + 11
                )
            })
            .collect();
        let sql = format!(
            "INSERT INTO calls (id, team_id, external_id, agent_id, from_number, to_number, direction, status, started_at, \
             ended_at, duration_seconds, summary, flagged, favorite, spam, created_at, updated_at) VALUES {}",
            rows.join(", ")
        );
        let mut query = sqlx::query(&sql);
        for (id, team, started, ended, from, to, summary, direction, agent, _) in &calls {
            query = query
                .bind(id.clone())
                .bind(team.clone())
                .bind(format!("ext-{id}"))
                .bind(agent.clone())
                .bind(from.clone())
                .bind(to.clone())
                .bind(direction.to_string())
                .bind(*started)
                .bind(*ended)
                .bind(ended.map(|ended| (ended - started) / 1000))
                .bind(summary.clone());
        }
        query.execute(&mut *tx).await.unwrap();
        let rows: Vec<String> = (0..n * 6)
            .map(|i| {
                format!("(${}, ${}, ${}, 'caller', ${}, ${}, 1)", i * 5 + 1, i * 5 + 2, i * 5 + 3, i * 5 + 4, i * 5 + 5)
            })
            .collect();
        let sql = format!(
            "INSERT INTO call_segments (call_id, team_id, seq, speaker, text, offset_ms, created_at) VALUES {}",
            rows.join(", ")
        );
        let mut query = sqlx::query(&sql);
        for (id, team, .., segments) in &calls {
            for (seq, text) in segments.iter().enumerate() {
                let seq = i64::try_from(seq).unwrap();
                query = query.bind(id.clone()).bind(team.clone()).bind(seq).bind(text.clone()).bind(seq * 5_000);
            }
        }
        query.execute(&mut *tx).await.unwrap();
        let rows: Vec<String> =
            (0..n * 2).map(|i| format!("(${}, ${}, ${}, ${})", i * 4 + 1, i * 4 + 2, i * 4 + 3, i * 4 + 4)).collect();
        let sql = format!("INSERT INTO call_search (call_id, team_id, source, body) VALUES {}", rows.join(", "));
        let mut query = sqlx::query(&sql);
        for (id, team, _, _, from, to, summary, _, _, segments) in &calls {
            let meta = format!("{from}\n{to}\n{}", summary.clone().unwrap_or_default()).to_lowercase();
            query = query.bind(id.clone()).bind(team.clone()).bind("meta").bind(meta);
            query =
                query.bind(id.clone()).bind(team.clone()).bind("transcript").bind(segments.join("\n").to_lowercase());
        }
        query.execute(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        written += n;
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1]
}

/// The targets of the store: with 100,000 calls in the team and 100,000 in others, a
/// filtered list answers within 20 ms at p99 and a search within 50 ms; transcripts go in at
/// 5,000 segments/s or more in batches of 100. Slow (it writes 200,000 calls): run with
/// `cargo test -p switchboard-conversations --test store -- --ignored --nocapture`.
#[tokio::test]
#[ignore]
async fn a_large_team_is_listed_and_searched_fast() {
    on_every_engine(|store| async move {
        let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
        let team = team();
        let others: Vec<String> = (0..10).map(|_| self::team()).collect();
        let agents: Vec<String> = (0..10).map(|_| uuid::Uuid::new_v4().to_string()).collect();
        let seeding = std::time::Instant::now();
        seed_calls(&store, (std::slice::from_ref(&team), &agents), 100_000, None, &mut dice).await;
        seed_calls(&store, (&others, &agents), 100_000, None, &mut dice).await;
        if store.db().engine() == Engine::Postgres {
            // What autovacuum does to a table that grew this much.
            sqlx::query("VACUUM ANALYZE").execute(store.db().pool()).await.unwrap();
        }
        eprintln!("seeded in {:?}", seeding.elapsed());
        measure(&store, &team, &agents, &mut dice).await;
    })
    .await;
}

async fn measure(store: &ConversationStore, team: &str, agents: &[String], dice: &mut Dice) {
    let sorts = [CallSort::CreatedAt, CallSort::Duration, CallSort::EndedAt];
    let mut filters = Vec::new();
    for round in 0..20u32 {
        let sort = sorts[round as usize % 3];
        let ascending = round % 2 == 0;
        let page = 1 + round % 5;
        let base = CallFilter { sort, ascending, page, limit: 20, ..calls_filter() };
        filters.push(("none", base.clone()));
        filters.push(("direction", CallFilter { direction: Some(Direction::Outgoing), ..base.clone() }));
        filters.push((
            "agent",
            CallFilter { agent_id: Some(agents[round as usize % agents.len()].clone()), ..base.clone() },
        ));
        filters.push(("duration", CallFilter { min_duration: Some(60), max_duration: Some(300), ..base.clone() }));
        let from = 1_700_000_000_000 + i64::from(round) * 4_000_000;
        let created =
            CallFilter { created_from_ms: Some(from), created_to_ms: Some(from + 20_000_000), ..base.clone() };
        filters.push(("created", created));
        filters.push(("number", CallFilter { number: Some(format!("+1415555{:04}", round * 37)), ..base.clone() }));
        let both = CallFilter {
            direction: Some(Direction::Incoming),
            agent_id: Some(agents[0].clone()),
            min_duration: Some(100),
            ..base.clone()
        };
        filters.push(("combined", both));
    }
    let mut searches = Vec::new();
    for round in 0..20u32 {
        let base =
            CallFilter { limit: 20, sort: sorts[round as usize % 3], ascending: round % 2 == 1, ..calls_filter() };
        searches.push(("number", CallFilter { search: Some(format!("5555{:03}", round * 7)), ..base.clone() }));
        let rare = format!("{} {}", dice.word(), dice.word());
        searches.push(("two words", CallFilter { search: Some(rare), ..base.clone() }));
        searches.push(("word", CallFilter { search: Some(dice.word()), ..base.clone() }));
        let filtered = CallFilter { direction: Some(Direction::Incoming), search: Some(dice.word()), ..base.clone() };
        searches.push(("word and filter", filtered));
    }
    for (label, list) in [("filtered list", &filters), ("search", &searches)] {
        let mut all = Vec::new();
        let mut by_kind: std::collections::BTreeMap<&str, Vec<Duration>> = Default::default();
        for (kind, filter) in list.iter() {
            let started = std::time::Instant::now();
            let (_, info) = store.list_calls(team, filter).await.unwrap();
            let took = started.elapsed();
            all.push(took);
            by_kind.entry(kind).or_default().push(took);
            if took > Duration::from_millis(20) {
                eprintln!("  slow {kind}: {took:?} ({} found) {:?}", info.total_count, filter.search);
            }
        }
        for (kind, samples) in &mut by_kind {
            eprintln!("  {label} {kind}: p50 {:?} max {:?}", percentile(samples, 0.5), percentile(samples, 1.0));
        }
        eprintln!("{label}: p50 {:?} p99 {:?}", percentile(&mut all, 0.5), percentile(&mut all, 0.99));
    }

    let calls: Vec<String> = (0..20).map(|i| format!("throughput-{i}-{}", dice.next())).collect();
    for external_id in &calls {
        store.upsert_call(team, new_call(external_id, 1_000)).await.unwrap();
    }
    let started = std::time::Instant::now();
    let mut appended = 0;
    for batch in 0..100i64 {
        let external_id = &calls[usize::try_from(batch).unwrap() % calls.len()];
        let segments: Vec<_> = (0..100).map(|i| segment(batch * 100 + i, &dice.sentence(12), i * 100)).collect();
        appended += store.append_transcript(team, external_id, segments).await.unwrap().appended;
    }
    let rate = f64::from(appended) / started.elapsed().as_secs_f64();
    eprintln!("append: {rate:.0} segments/s");
}

#[tokio::test]
async fn usage_counts_calls_minutes_and_chats_per_day() {
    on_every_engine(|store| async move {
        let team = team();
        const DAY: i64 = 86_400_000;
        let day = 20_000 * DAY;
        store.upsert_call(&team, new_call("u1", day + 1_000)).await.unwrap();
        store.end_call(&team, "u1", end(day + 126_000, None)).await.unwrap();
        store.upsert_call(&team, new_call("u2", day + DAY - 1)).await.unwrap();
        store.upsert_call(&team, new_call("u3", day + DAY)).await.unwrap();
        store.upsert_chat(&team, new_chat("u4", day + DAY + 5)).await.unwrap();
        store.upsert_call(&self::team(), new_call("theirs", day + 1_000)).await.unwrap();

        let days = store.usage(&team, day, day + 2 * DAY).await.unwrap();
        let seen: Vec<_> = days.iter().map(|d| (d.day_ms, d.calls, d.call_seconds, d.chats)).collect();
        assert_eq!(seen, [(day, 2, 125, 0), (day + DAY, 1, 0, 1)]);
        assert!(store.usage(&team, day + 2 * DAY, day + 3 * DAY).await.unwrap().is_empty());
    })
    .await;
}

fn outcome(sentiment: Sentiment, successful: Option<bool>, reason: DisconnectionReason, cost: i64) -> CallEnd {
    CallEnd {
        analysis: Some(AnalysisEnd { sentiment, successful, custom: r#"{"tier":"gold"}"#.into() }),
        disconnection_reason: Some(reason),
        cost: Some(CallCost { credits: cost, unpaid: 0, credit_entry_id: None }),
        ..end(0, Some("Booked a table"))
    }
}

#[tokio::test]
async fn an_end_records_analysis_reason_and_cost_once() {
    on_every_engine(|store| async move {
        let team = team();
        store.upsert_call(&team, new_call("a1", 0)).await.unwrap();
        let mut first = outcome(Sentiment::Positive, Some(true), DisconnectionReason::CustomerHangup, 12);
        first.ended_at_ms = 60_000;
        first.cost = Some(CallCost { credits: 12, unpaid: 2, credit_entry_id: Some("entry".into()) });
        let ended = store.end_call(&team, "a1", first.clone()).await.unwrap();
        let analysis = ended.analysis.clone().unwrap();
        assert_eq!((analysis.sentiment.as_str(), analysis.successful), ("positive", Some(true)));
        assert_eq!(
            (analysis.summary.as_deref(), analysis.custom_json.as_str()),
            (Some("Booked a table"), r#"{"tier":"gold"}"#)
        );
        assert_eq!(ended.disconnection_reason.as_deref(), Some("customer_hangup"));
        assert_eq!((ended.cost_credits, ended.cost_unpaid_credits), (Some(12), Some(2)));
        // The same end again changes nothing; another cost is refused and writes nothing.
        let again = store.end_call(&team, "a1", first.clone()).await.unwrap();
        assert_eq!(again.updated_at_ms, ended.updated_at_ms);
        let other = CallEnd { cost: Some(CallCost { credits: 13, unpaid: 0, credit_entry_id: None }), ..first };
        let error = store.end_call(&team, "a1", other).await.unwrap_err();
        assert_eq!(error.details[0].field, "costCredits");
        assert_eq!(store.call_by_external_id(&team, "a1").await.unwrap().cost_credits, Some(12));
        // A plain end keeps the analysis, reason and cost.
        let kept = store.end_call(&team, "a1", end(61_000, None)).await.unwrap();
        assert_eq!(
            (kept.analysis, kept.disconnection_reason, kept.cost_credits),
            (ended.analysis, ended.disconnection_reason, Some(12))
        );
        // A call never analysed has none.
        store.upsert_call(&team, new_call("a2", 0)).await.unwrap();
        let plain = store.end_call(&team, "a2", end(1_000, None)).await.unwrap();
        assert_eq!((plain.analysis, plain.disconnection_reason, plain.cost_credits), (None, None, None));
    })
    .await;
}

/// Five calls of one day and one of the next, with every kind of outcome.
async fn outcome_fixture(store: &ConversationStore, team: &str, day: i64) {
    let outcomes = [
        (Sentiment::Positive, Some(true), DisconnectionReason::CustomerHangup, 5),
        (Sentiment::Negative, Some(false), DisconnectionReason::AgentHangup, 3),
        (Sentiment::Neutral, None, DisconnectionReason::Voicemail, 0),
        (Sentiment::Unknown, Some(true), DisconnectionReason::CustomerHangup, 1),
    ];
    for (index, (sentiment, successful, reason, cost)) in outcomes.into_iter().enumerate() {
        let external = format!("o{index}");
        let start = day + i64::try_from(index).unwrap() * 1_000;
        store.upsert_call(team, new_call(&external, start)).await.unwrap();
        let ended = CallEnd { ended_at_ms: start + 90_000, ..outcome(sentiment, successful, reason, cost) };
        store.end_call(team, &external, ended).await.unwrap();
    }
    // Never analysed: counted as unknown sentiment, in no reason, neither successful nor not.
    store.upsert_call(team, new_call("o4", day + 10_000)).await.unwrap();
    store.end_call(team, "o4", end(day + 40_000, None)).await.unwrap();
    store.upsert_call(team, new_call("o5", day + 86_400_000)).await.unwrap();
}

#[tokio::test]
async fn calls_filter_by_sentiment_success_and_reason() {
    on_every_engine(|store| async move {
        let team = team();
        outcome_fixture(&store, &team, 0).await;
        outcome_fixture(&store, &self::team(), 0).await;
        let filtered = |change: fn(&mut CallFilter)| {
            let mut filter = calls_filter();
            change(&mut filter);
            filter
        };
        let positive = filtered(|f| f.sentiment = Some(Sentiment::Positive));
        assert_eq!(listed_calls(&store, &team, positive).await.len(), 1);
        let unknown = filtered(|f| f.sentiment = Some(Sentiment::Unknown));
        assert_eq!(listed_calls(&store, &team, unknown).await.len(), 1, "a call without analysis has no sentiment");
        let successful = filtered(|f| f.successful = Some(true));
        assert_eq!(listed_calls(&store, &team, successful).await.len(), 2);
        let unsuccessful = filtered(|f| f.successful = Some(false));
        assert_eq!(listed_calls(&store, &team, unsuccessful).await.len(), 1);
        let hangups = filtered(|f| {
            f.disconnection_reason = Some(DisconnectionReason::CustomerHangup);
            f.successful = Some(true);
        });
        assert_eq!(listed_calls(&store, &team, hangups).await.len(), 2);
    })
    .await;
}

#[tokio::test]
async fn analytics_count_outcomes_per_day() {
    on_every_engine(|store| async move {
        let team = team();
        const DAY: i64 = 86_400_000;
        let day = 20_000 * DAY;
        outcome_fixture(&store, &team, day).await;
        outcome_fixture(&store, &self::team(), day).await;
        let days = store.call_analytics(&team, (day, day + 2 * DAY), None).await.unwrap();
        assert_eq!(days.len(), 2);
        let first = &days[0];
        assert_eq!((first.day_ms, first.calls, first.seconds, first.cost_credits), (day, 5, 4 * 90 + 30, 9));
        assert_eq!((first.successful, first.unsuccessful), (2, 1));
        assert_eq!((first.positive, first.neutral, first.negative, first.unknown), (1, 1, 1, 2));
        assert_eq!(first.disconnection_reasons["customer_hangup"], 2);
        assert_eq!(first.disconnection_reasons["voicemail"], 1);
        assert_eq!(first.disconnection_reasons["busy"], 0);
        assert_eq!(first.disconnection_reasons.len(), 8);
        assert_eq!((days[1].day_ms, days[1].calls, days[1].unknown), (day + DAY, 1, 1));
        let agent = uuid::Uuid::new_v4().to_string();
        assert!(store.call_analytics(&team, (day, day + 2 * DAY), Some(&agent)).await.unwrap().is_empty());
        let error = store.call_analytics(&team, (day, day), Some("nope")).await.unwrap_err();
        assert_eq!(error.details[0].field, "agentId");
    })
    .await;
}

#[tokio::test]
async fn exports_read_every_call_once_in_keyset_pages() {
    on_every_engine(|store| async move {
        let team = team();
        outcome_fixture(&store, &team, 0).await;
        // More than a page, some sharing a start, so that a page boundary falls inside a tie.
        for index in 0..1_005 {
            store.upsert_call(&team, new_call(&format!("bulk{index}"), 500_000 + index / 3)).await.unwrap();
        }
        let filter = calls_filter();
        assert_eq!(store.export_custom_names(&team, &filter).await.unwrap(), ["tier"]);
        let mut seen = Vec::new();
        let mut after: Option<ExportCursor> = None;
        loop {
            let page = store.export_page(&team, &filter, after.as_ref()).await.unwrap();
            seen.extend(page.iter().map(|call| call.external_id.clone()));
            match page.last() {
                Some(last) if page.len() == 1_000 => {
                    after = Some(ExportCursor { started_at_ms: last.started_at_ms, id: last.id.clone() });
                }
                _ => break,
            }
        }
        assert_eq!(seen.len(), 1_011);
        assert_eq!(seen.iter().collect::<std::collections::HashSet<_>>().len(), 1_011);
        assert_eq!(seen[0], "o0");
        let positive = CallFilter { sentiment: Some(Sentiment::Positive), ..calls_filter() };
        assert_eq!(store.export_page(&team, &positive, None).await.unwrap().len(), 1);
        let none = CallFilter { sentiment: Some(Sentiment::Negative), successful: Some(true), ..calls_filter() };
        assert!(store.export_custom_names(&team, &none).await.unwrap().is_empty());
    })
    .await;
}
