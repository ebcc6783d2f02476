//! Runtime settings versioned with the instructions, the change log and `WatchAgents`' feed, on
//! SQLite and on PostgreSQL (when `TEST_DATABASE_URL` is set).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{on_every_engine, team};
use switchboard_agents::store::{AgentChanges, NewAgent};
use switchboard_agents::watch::Feed;
use switchboard_kit::ErrorKind;
use switchboard_proto::v1::tool::Kind;
use switchboard_proto::v1::{AgentChange, AgentChangeKind, AgentSettings, AgentType, EndCallTool, Tool};
use tokio::sync::mpsc;
use tonic::Status;

fn agent(settings: AgentSettings) -> NewAgent {
    NewAgent {
        name: "Ava".into(),
        description: None,
        agent_type: AgentType::Phone,
        instructions: None,
        knowledgebase_id: None,
        settings,
    }
}

fn greeting(text: &str) -> AgentSettings {
    AgentSettings { first_message: Some(text.into()), ..AgentSettings::default() }
}

fn settings_change(settings: AgentSettings, paths: &[&str]) -> AgentChanges {
    AgentChanges { settings, settings_paths: paths.iter().map(|p| (*p).to_owned()).collect(), ..Default::default() }
}

#[tokio::test]
async fn a_settings_change_is_a_version_that_a_restore_puts_back() {
    on_every_engine(|store| async move {
        let team = team();
        let created = store.create(&team, agent(greeting("Hello"))).await.unwrap();
        assert_eq!(store.instructions(&team, &created.id).await.unwrap().version, 1);

        let end_call = Tool { kind: Some(Kind::EndCall(EndCallTool { description: None })) };
        let tools = AgentSettings { tools: vec![end_call], ..AgentSettings::default() };
        let updated =
            store.update(&team, &created.id, settings_change(tools, &["tools", "first_message"])).await.unwrap();
        let settings = updated.settings.unwrap();
        assert_eq!((settings.first_message, settings.tools.len()), (None, 1));
        assert_eq!(store.instructions(&team, &created.id).await.unwrap().version, 2);

        let history = store.history(&team, &created.id).await.unwrap();
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].settings.as_ref().unwrap().first_message.as_deref(), Some("Hello"));

        let restored = store.restore(&team, &created.id, 1).await.unwrap();
        assert_eq!(restored.version, 3);
        let now = store.get(&team, &created.id).await.unwrap().settings.unwrap();
        assert_eq!((now.first_message.as_deref(), now.tools.len()), (Some("Hello"), 0));

        // The same settings again are no new version; a rename alone is none either.
        store.update(&team, &created.id, settings_change(greeting("Hello"), &["first_message"])).await.unwrap();
        store
            .update(&team, &created.id, AgentChanges { name: Some("Bea".into()), ..Default::default() })
            .await
            .unwrap();
        assert_eq!(store.instructions(&team, &created.id).await.unwrap().version, 3);

        // A bad value changes nothing.
        let bad = AgentSettings { language: Some("english please".into()), ..AgentSettings::default() };
        let error = store.update(&team, &created.id, settings_change(bad, &["language"])).await.unwrap_err();
        assert_eq!((error.kind, error.details[0].field.as_str()), (ErrorKind::Validation, "language"));
        assert_eq!(store.instructions(&team, &created.id).await.unwrap().version, 3);
    })
    .await;
}

#[tokio::test]
async fn the_change_log_tells_each_change_in_order_and_per_team() {
    on_every_engine(|store| async move {
        let (mine, theirs) = (team(), team());
        let start = store.watch_version().await.unwrap();
        let a = store.create(&mine, agent(AgentSettings::default())).await.unwrap();
        store.create(&theirs, agent(AgentSettings::default())).await.unwrap();
        store.replace_instructions(&mine, &a.id, "Be brief.").await.unwrap();
        store.delete(&mine, &a.id).await.unwrap();

        let changes = store.changes_after(Some(&mine), start, 100).await.unwrap();
        let kinds: Vec<&str> = changes.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(kinds, ["updated", "updated", "deleted"]);
        assert!(changes.windows(2).all(|pair| pair[0].seq < pair[1].seq));
        assert!(changes.iter().all(|c| c.team_id == mine && c.agent_id == a.id));
        assert_eq!(store.changes_after(None, start, 100).await.unwrap().len(), 4);

        let newest = store.watch_version().await.unwrap();
        assert!(store.check_watch_start(start).await.unwrap().is_ok());
        assert!(store.check_watch_start(newest + 1).await.unwrap().is_err());
    })
    .await;
}

/// The next change on `changes`, waiting at most 10 s.
async fn next(changes: &mut mpsc::Receiver<Result<AgentChange, Status>>, waiting_for: &str) -> AgentChange {
    tokio::time::timeout(Duration::from_secs(10), changes.recv())
        .await
        .unwrap_or_else(|_| panic!("no change within 10 s: {waiting_for}"))
        .unwrap_or_else(|| panic!("the stream ended: {waiting_for}"))
        .unwrap()
}

#[tokio::test]
async fn a_watch_resumed_after_a_disconnect_misses_nothing() {
    on_every_engine(|store| async move {
        let feed = Feed::new(store.clone()).await.unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let running = tokio::spawn(Arc::clone(&feed).run(stopped));
        let team = team();

        let mut changes = feed.watch(Some(team.clone()), 0).await.unwrap();
        let created = store.create(&team, agent(greeting("Hi"))).await.unwrap();
        let first = next(&mut changes, "the created agent").await;
        assert_eq!((first.agent_id.as_str(), first.kind()), (created.id.as_str(), AgentChangeKind::Updated));
        let config = first.config.unwrap();
        assert_eq!(config.agent.unwrap().settings.unwrap().first_message.as_deref(), Some("Hi"));

        // Disconnected: a change happens meanwhile; the resumed stream starts with it.
        drop(changes);
        store.update(&team, &created.id, settings_change(greeting("Welcome back"), &["first_message"])).await.unwrap();
        store.create(&uuid::Uuid::new_v4().to_string(), agent(AgentSettings::default())).await.unwrap();
        let mut changes = feed.watch(Some(team.clone()), first.version).await.unwrap();
        let missed = next(&mut changes, "the change made while disconnected").await;
        let settings = missed.config.unwrap().agent.unwrap().settings.unwrap();
        assert_eq!(settings.first_message.as_deref(), Some("Welcome back"));

        store.delete(&team, &created.id).await.unwrap();
        let gone = next(&mut changes, "the deletion").await;
        assert_eq!((gone.kind(), gone.config.is_none()), (AgentChangeKind::Deleted, true));
        assert!(gone.version > missed.version);

        let too_new = feed.watch(None, gone.version + 1_000_000).await.unwrap_err();
        assert_eq!(too_new.code(), tonic::Code::OutOfRange);

        stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), running).await.expect("the feed stops within 5 s").unwrap();
    })
    .await;
}
