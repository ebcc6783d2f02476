//! The agents store on SQLite and on PostgreSQL (when `TEST_DATABASE_URL` is set).

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{on_every_engine, team};
use switchboard_agents::prompt::{OPTIMIZE_PROMPT, OptimizePrompt};
use switchboard_agents::store::{AgentChanges, HISTORY_LIMIT, NewAgent};
use switchboard_kit::ErrorKind;
use switchboard_kit::jobs::{Runner, RunnerConfig};
use switchboard_proto::v1::{AgentSettings, AgentType};

fn new_agent(name: &str, instructions: Option<&str>) -> NewAgent {
    NewAgent {
        name: name.into(),
        description: None,
        agent_type: AgentType::Phone,
        instructions: instructions.map(str::to_owned),
        knowledgebase_id: None,
        settings: Default::default(),
    }
}

#[tokio::test]
async fn agents_are_listed_newest_first_and_only_to_their_team() {
    on_every_engine(|store| async move {
        let (mine, theirs) = (team(), team());
        for name in ["first", "second", "third"] {
            store.create(&mine, new_agent(name, None)).await.unwrap();
        }
        let secret = store.create(&theirs, new_agent("secret", None)).await.unwrap();
        let names: Vec<_> = store.list(&mine).await.unwrap().into_iter().map(|a| a.name).collect();
        assert_eq!(names, ["third", "second", "first"]);
        assert_eq!(store.get(&mine, &secret.id).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(store.instructions(&mine, &secret.id).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(store.delete(&mine, &secret.id).await.unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(
            store.update(&mine, &secret.id, AgentChanges::default()).await.unwrap_err().kind,
            ErrorKind::NotFound
        );
        assert_eq!(store.list(&theirs).await.unwrap().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn updates_change_only_what_they_name() {
    on_every_engine(|store| async move {
        let team = team();
        let knowledgebase = uuid::Uuid::new_v4().to_string();
        let agent = store
            .create(
                &team,
                NewAgent {
                    description: Some("desk".into()),
                    knowledgebase_id: Some(knowledgebase.clone()),
                    ..new_agent("Ava", None)
                },
            )
            .await
            .unwrap();
        let renamed = store
            .update(&team, &agent.id, AgentChanges { name: Some("Eve".into()), ..AgentChanges::default() })
            .await
            .unwrap();
        assert_eq!((renamed.name.as_str(), renamed.description.as_deref()), ("Eve", Some("desk")));
        assert_eq!(renamed.knowledgebase_id.as_deref(), Some(knowledgebase.as_str()));
        let unlinked = store
            .update(
                &team,
                &agent.id,
                AgentChanges { knowledgebase_id: Some(None), description: Some(None), ..AgentChanges::default() },
            )
            .await
            .unwrap();
        assert_eq!((unlinked.knowledgebase_id, unlinked.description), (None, None));

        let relinked = store
            .update(
                &team,
                &agent.id,
                AgentChanges { knowledgebase_id: Some(Some(knowledgebase.clone())), ..AgentChanges::default() },
            )
            .await
            .unwrap();
        assert!(relinked.knowledgebase_id.is_some());
        assert_eq!(store.unlink_knowledgebase(&team, &knowledgebase).await.unwrap(), 1);
        assert_eq!(store.get(&team, &agent.id).await.unwrap().knowledgebase_id, None);
    })
    .await;
}

#[tokio::test]
async fn invalid_agents_are_refused_with_every_field() {
    on_every_engine(|store| async move {
        let error = store
            .create(
                &team(),
                NewAgent {
                    name: " ".into(),
                    description: Some("d".repeat(5001)),
                    agent_type: AgentType::Unspecified,
                    instructions: Some("x".repeat(100_001)),
                    knowledgebase_id: Some("nope".into()),
                    settings: AgentSettings { language: Some("en_US".into()), ..AgentSettings::default() },
                },
            )
            .await
            .unwrap_err();
        let fields: Vec<_> = error.details.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["name", "description", "type", "instructions", "knowledgebaseId", "language"]);

        // NUL is a validation error on both engines, not a PostgreSQL failure.
        let agent = store
            .create(
                &team(),
                NewAgent {
                    name: "Ava".into(),
                    description: None,
                    agent_type: AgentType::Chat,
                    instructions: None,
                    knowledgebase_id: None,
                    settings: AgentSettings::default(),
                },
            )
            .await
            .unwrap();
        let error = store.replace_instructions(&agent.team_id, &agent.id, "a\0b").await.unwrap_err();
        assert_eq!(error.details[0].field, "instructions");
        assert_eq!(error.details[0].message, "must not contain NUL characters");
    })
    .await;
}

#[tokio::test]
async fn history_keeps_exactly_the_last_twenty_versions() {
    on_every_engine(|store| async move {
        let team = team();
        let agent = store.create(&team, new_agent("Ava", Some("version 1"))).await.unwrap();
        for version in 2..=26 {
            let instructions =
                store.replace_instructions(&team, &agent.id, &format!("version {version}")).await.unwrap();
            assert_eq!(instructions.version, version);
        }
        let history = store.history(&team, &agent.id).await.unwrap();
        assert_eq!(history.len(), usize::try_from(HISTORY_LIMIT).unwrap());
        let versions: Vec<i64> = history.iter().map(|v| v.version).collect();
        assert_eq!(versions, (6..=25).rev().collect::<Vec<_>>());
        assert_eq!(history[0].instructions, "version 25");
        assert!(history.iter().all(|v| v.replaced_at_ms >= v.created_at_ms));
        assert_eq!(store.instructions(&team, &agent.id).await.unwrap().instructions, "version 26");
        assert_eq!(store.instruction_version(&team, &agent.id, 6).await.unwrap(), history[19]);
        let pruned = store.instruction_version(&team, &agent.id, 5).await.unwrap_err();
        assert_eq!(pruned.kind, ErrorKind::NotFound);
        let foreign = store.instruction_version(&uuid::Uuid::new_v4().to_string(), &agent.id, 6).await.unwrap_err();
        assert_eq!(foreign.kind, ErrorKind::NotFound);
    })
    .await;
}

#[tokio::test]
async fn concurrent_replacements_lose_no_version() {
    on_every_engine(|store| async move {
        let team = team();
        let agent = store.create(&team, new_agent("Ava", Some("v1"))).await.unwrap();
        let writers = (0..30).map(|i| {
            let (store, team, id) = (store.clone(), team.clone(), agent.id.clone());
            tokio::spawn(async move { store.replace_instructions(&team, &id, &format!("writer {i}")).await })
        });
        for writer in writers {
            writer.await.unwrap().unwrap();
        }
        let current = store.instructions(&team, &agent.id).await.unwrap();
        assert_eq!(current.version, 31);
        let history = store.history(&team, &agent.id).await.unwrap();
        let versions: Vec<i64> = history.iter().map(|v| v.version).collect();
        assert_eq!(versions, (11..=30).rev().collect::<Vec<_>>());
    })
    .await;
}

#[tokio::test]
async fn instruction_bounds_count_unicode_characters() {
    on_every_engine(|store| async move {
        let team = team();
        let agent = store.create(&team, new_agent("Ava", None)).await.unwrap();
        assert_eq!(store.instructions(&team, &agent.id).await.unwrap().version, 0);
        store.replace_instructions(&team, &agent.id, &"é".repeat(100_000)).await.unwrap();
        store.replace_instructions(&team, &agent.id, "x").await.unwrap();
        for bad in [String::new(), "é".repeat(100_001)] {
            let error = store.replace_instructions(&team, &agent.id, &bad).await.unwrap_err();
            assert_eq!(error.kind, ErrorKind::Validation);
            assert_eq!(error.details[0].field, "instructions");
        }
        // The first text replaced nothing, so the history holds only the 100 000 é.
        let history = store.history(&team, &agent.id).await.unwrap();
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].instructions.chars().count(), 100_000);
    })
    .await;
}

#[tokio::test]
async fn a_saved_version_can_be_restored() {
    on_every_engine(|store| async move {
        let team = team();
        let agent = store.create(&team, new_agent("Ava", Some("original"))).await.unwrap();
        store.replace_instructions(&team, &agent.id, "changed").await.unwrap();
        let restored = store.restore(&team, &agent.id, 1).await.unwrap();
        assert_eq!((restored.instructions.as_str(), restored.version), ("original", 3));
        assert_eq!(store.history(&team, &agent.id).await.unwrap()[0].instructions, "changed");
        assert_eq!(store.restore(&team, &agent.id, 99).await.unwrap_err().kind, ErrorKind::NotFound);
    })
    .await;
}

#[tokio::test]
async fn the_prompt_job_builds_the_runtime_prompt_of_the_latest_version() {
    on_every_engine(|store| async move {
        let team = team();
        let agent = store.create(&team, new_agent("Ava", Some("Greet callers warmly."))).await.unwrap();
        let queued = store.replace_instructions(&team, &agent.id, "Greet callers by name.").await.unwrap();
        assert_eq!(queued.optimization.as_ref().unwrap().status, "queued");
        assert_eq!(store.runtime_prompt(&team, &agent.id).await.unwrap_err().kind, ErrorKind::NotFound);

        let runner = Runner::new(store.db().clone(), RunnerConfig::default())
            .handle(OPTIMIZE_PROMPT, OptimizePrompt::new(store.clone()));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let running = tokio::spawn(runner.run(stopped));

        let mut built = None;
        for _ in 0..100 {
            let instructions = store.instructions(&team, &agent.id).await.unwrap();
            if instructions.optimization.as_ref().unwrap().status == "completed" {
                built = Some(instructions);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let built = built.expect("the job completed");
        let optimization = built.optimization.unwrap();
        assert_eq!(optimization.version, 2);
        assert!(optimization.completed_at_ms.is_some());
        let prompt = store.runtime_prompt(&team, &agent.id).await.unwrap();
        assert_eq!(prompt.instructions_version, 2);
        assert!(prompt.prompt.contains("Greet callers by name."));
        assert!(prompt.prompt.contains("You are Ava"));

        stop.send(true).unwrap();
        running.await.unwrap();
    })
    .await;
}
