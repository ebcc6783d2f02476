//! Agents: create, read, update (name, description, linked knowledge base), delete.

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::jobs::{self, NewJob};
use switchboard_kit::limits;
use switchboard_kit::time::now_ms;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, validate};
use switchboard_proto::v1::{Agent, AgentSettings, AgentType};

use super::OPTIMIZE_PROMPT;
use super::changes::{DELETED, UPDATED};
use super::{AgentStore, check_ids, together};
use crate::settings;

pub(super) const AGENT_COLUMNS: &str =
    "id, team_id, name, description, type, knowledgebase_id, settings, created_at, updated_at";

pub(super) fn agent_from_row(row: &AnyRow) -> Result<Agent, sqlx::Error> {
    let kind: String = row.try_get("type")?;
    Ok(Agent {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        r#type: if kind == "phone" { AgentType::Phone } else { AgentType::Chat }.into(),
        knowledgebase_id: row.try_get("knowledgebase_id")?,
        created_at_ms: row.try_get("created_at")?,
        updated_at_ms: row.try_get("updated_at")?,
        settings: Some(settings::decode(row.try_get("settings")?)?),
    })
}

#[derive(Debug, Clone)]
pub struct NewAgent {
    pub name: String,
    pub description: Option<String>,
    pub agent_type: AgentType,
    pub instructions: Option<String>,
    pub knowledgebase_id: Option<String>,
    pub settings: AgentSettings,
}

/// A partial update; `Some(None)` clears a nullable field.
#[derive(Debug, Clone, Default)]
pub struct AgentChanges {
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub knowledgebase_id: Option<Option<String>>,
    /// The settings members named (`settings::PATHS`) with their values; none named keeps all.
    pub settings: AgentSettings,
    pub settings_paths: Vec<String>,
}

fn knowledgebase_id_violation(id: Option<&str>) -> Option<FieldViolation> {
    id.and_then(|id| {
        uuid::Uuid::parse_str(id).is_err().then(|| FieldViolation::new("knowledgebaseId", "must be a UUID"))
    })
}

impl NewAgent {
    /// Every field's bound, checked before anything is looked up.
    pub fn validate(&self) -> ServiceResult<()> {
        let instructions = self.instructions.as_deref().filter(|text| !text.is_empty());
        validate([
            limits::NAME.check("name", &self.name),
            self.description.as_deref().and_then(|d| limits::DESCRIPTION.check("description", d)),
            type_str(self.agent_type).is_none().then(|| FieldViolation::new("type", "must be phone or chat")),
            instructions.and_then(|text| limits::INSTRUCTIONS.check("instructions", text)),
            knowledgebase_id_violation(self.knowledgebase_id.as_deref()),
        ])
    }
}

impl AgentChanges {
    pub fn validate(&self) -> ServiceResult<()> {
        validate([
            self.name.as_deref().and_then(|n| limits::NAME.check("name", n)),
            self.description
                .as_ref()
                .and_then(|d| d.as_deref().and_then(|d| limits::DESCRIPTION.check("description", d))),
            knowledgebase_id_violation(self.knowledgebase_id.clone().flatten().as_deref()),
        ])
    }
}

pub(super) fn type_str(agent_type: AgentType) -> Option<&'static str> {
    match agent_type {
        AgentType::Phone => Some("phone"),
        AgentType::Chat => Some("chat"),
        AgentType::Unspecified => None,
    }
}

impl AgentStore {
    /// Newest first.
    pub async fn list(&self, team_id: &str) -> ServiceResult<Vec<Agent>> {
        check_ids(&[("teamId", team_id)])?;
        let rows = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE team_id = $1 ORDER BY created_at DESC, id DESC"
        ))
        .bind(team_id)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(agent_from_row).collect::<Result<_, _>>()?)
    }

    pub async fn get(&self, team_id: &str, agent_id: &str) -> ServiceResult<Agent> {
        check_ids(&[("teamId", team_id), ("agentId", agent_id)])?;
        let row = sqlx::query(&format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1 AND team_id = $2"))
            .bind(agent_id)
            .bind(team_id)
            .fetch_optional(self.db.pool())
            .await?
            .ok_or_else(ServiceError::agent_not_found)?;
        Ok(agent_from_row(&row)?)
    }

    /// Creates an agent; with instructions they are version 1. A prompt job is queued
    /// either way, so that the agent has a runtime prompt from the start.
    pub async fn create(&self, team_id: &str, new: NewAgent) -> ServiceResult<Agent> {
        check_ids(&[("teamId", team_id)])?;
        let settings = together(new.validate(), settings::checked(new.settings))?;
        let kind = type_str(new.agent_type);
        let instructions = new.instructions.unwrap_or_default();
        let now = now_ms();
        let id = uuid::Uuid::now_v7().to_string();
        // Version 1 is the first instructions or settings; 0 means neither was ever set.
        let version = i64::from(!instructions.is_empty() || settings != AgentSettings::default());
        let mut tx = self.db.begin_write().await?;
        sqlx::query(
            "INSERT INTO agents (id, team_id, name, description, type, knowledgebase_id, instructions, \
             instructions_version, instructions_updated_at, created_at, updated_at, settings) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $9, $10)",
        )
        .bind(&id)
        .bind(team_id)
        .bind(new.name.trim())
        .bind(new.description.as_deref())
        .bind(kind.unwrap_or("chat"))
        .bind(new.knowledgebase_id.as_deref())
        .bind(&instructions)
        .bind(version)
        .bind(now)
        .bind(settings::encode(&settings))
        .execute(&mut *tx)
        .await?;
        jobs::enqueue(
            &mut tx,
            NewJob {
                kind: OPTIMIZE_PROMPT,
                team_id,
                subject_id: &id,
                payload: serde_json::json!({ "version": version }),
                max_attempts: 5,
            },
        )
        .await?;
        let row = sqlx::query(&format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1"))
            .bind(&id)
            .fetch_one(&mut *tx)
            .await?;
        self.record_change(&mut tx, team_id, &id, UPDATED).await?;
        tx.commit().await?;
        self.changed();
        Ok(agent_from_row(&row)?)
    }

    pub async fn update(&self, team_id: &str, agent_id: &str, changes: AgentChanges) -> ServiceResult<Agent> {
        check_ids(&[("teamId", team_id), ("agentId", agent_id)])?;
        // The named settings alone, checked before anything is looked up.
        let paths = &changes.settings_paths;
        let given = together(changes.validate(), settings::merged(AgentSettings::default(), changes.settings, paths))?;
        let mut tx = self.db.begin_write().await?;
        let previous = self.current(&mut tx, team_id, agent_id, true).await?;
        if !paths.is_empty() {
            let settings = settings::merged(previous.agent.settings.clone().unwrap_or_default(), given, paths)?;
            if Some(&settings) != previous.agent.settings.as_ref() {
                let text = previous.instructions.clone();
                self.write_version(&mut tx, &previous, &text, &settings).await?;
            }
        }
        let current = previous.agent;
        let name = changes.name.map_or(current.name, |n| n.trim().to_owned());
        let description = changes.description.unwrap_or(current.description);
        let knowledgebase_id = changes.knowledgebase_id.unwrap_or(current.knowledgebase_id);
        sqlx::query(
            "UPDATE agents SET name = $1, description = $2, knowledgebase_id = $3, updated_at = $4 \
             WHERE id = $5 AND team_id = $6",
        )
        .bind(&name)
        .bind(description.as_deref())
        .bind(knowledgebase_id.as_deref())
        .bind(now_ms())
        .bind(agent_id)
        .bind(team_id)
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(&format!("SELECT {AGENT_COLUMNS} FROM agents WHERE id = $1"))
            .bind(agent_id)
            .fetch_one(&mut *tx)
            .await?;
        self.record_change(&mut tx, team_id, agent_id, UPDATED).await?;
        tx.commit().await?;
        self.changed();
        Ok(agent_from_row(&row)?)
    }

    /// Deletes the agent with its history and runtime prompt.
    pub async fn delete(&self, team_id: &str, agent_id: &str) -> ServiceResult<Agent> {
        let agent = self.get(team_id, agent_id).await?;
        let mut tx = self.db.begin_write().await?;
        for table in ["instruction_versions", "runtime_prompts"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE agent_id = $1 AND team_id = $2"))
                .bind(agent_id)
                .bind(team_id)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("DELETE FROM agents WHERE id = $1 AND team_id = $2")
            .bind(agent_id)
            .bind(team_id)
            .execute(&mut *tx)
            .await?;
        self.record_change(&mut tx, team_id, agent_id, DELETED).await?;
        tx.commit().await?;
        self.changed();
        Ok(agent)
    }

    /// Unlinks every agent of the team from a knowledge base that is going away.
    pub async fn unlink_knowledgebase(&self, team_id: &str, knowledgebase_id: &str) -> ServiceResult<i64> {
        check_ids(&[("teamId", team_id), ("knowledgebaseId", knowledgebase_id)])?;
        let mut tx = self.db.begin_write().await?;
        let linked: Vec<String> =
            sqlx::query_scalar("SELECT id FROM agents WHERE team_id = $1 AND knowledgebase_id = $2")
                .bind(team_id)
                .bind(knowledgebase_id)
                .fetch_all(&mut *tx)
                .await?;
        sqlx::query(
            "UPDATE agents SET knowledgebase_id = NULL, updated_at = $1 WHERE team_id = $2 AND knowledgebase_id = $3",
        )
        .bind(now_ms())
        .bind(team_id)
        .bind(knowledgebase_id)
        .execute(&mut *tx)
        .await?;
        for agent_id in &linked {
            self.record_change(&mut tx, team_id, agent_id, UPDATED).await?;
        }
        tx.commit().await?;
        self.changed();
        Ok(i64::try_from(linked.len()).unwrap_or(i64::MAX))
    }
}
