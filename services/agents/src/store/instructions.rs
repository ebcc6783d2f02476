//! Instructions: full replacement with the previous text kept in a history of the last
//! [`HISTORY_LIMIT`] versions, and a prompt-optimisation job queued in the same
//! transaction. Writers of one agent are serialised by the row lock (SQLite: the write
//! transaction), so concurrent replacements never lose a version or keep more than the limit.

use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::jobs::{self, NewJob};
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::vocabulary::JobStatus;
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::{
    Agent, AgentSettings, InstructionVersion, Instructions, PromptOptimization, RuntimePrompt,
};

use super::OPTIMIZE_PROMPT;
use super::agents::{AGENT_COLUMNS, agent_from_row};
use super::changes::UPDATED;
use super::{AgentStore, check_ids};
use crate::settings;

pub const HISTORY_LIMIT: i64 = 20;

/// An agent as it is now, with its instructions; its settings are `agent.settings`.
pub(super) struct Current {
    pub agent: Agent,
    pub instructions: String,
    pub version: i64,
    pub updated_at: i64,
}

const VERSION_COLUMNS: &str = "version, instructions, settings, created_at, replaced_at";

fn version_from_row(row: &AnyRow) -> Result<InstructionVersion, sqlx::Error> {
    Ok(InstructionVersion {
        version: row.try_get("version")?,
        instructions: row.try_get("instructions")?,
        created_at_ms: row.try_get("created_at")?,
        replaced_at_ms: row.try_get("replaced_at")?,
        settings: Some(settings::decode(row.try_get("settings")?)?),
    })
}

impl AgentStore {
    pub(super) async fn current(
        &self,
        conn: &mut sqlx::AnyConnection,
        team_id: &str,
        agent_id: &str,
        lock: bool,
    ) -> ServiceResult<Current> {
        let row = sqlx::query(&format!(
            "SELECT {AGENT_COLUMNS}, instructions, instructions_version, instructions_updated_at \
             FROM agents WHERE id = $1 AND team_id = $2{}",
            if lock { self.db.for_update() } else { "" }
        ))
        .bind(agent_id)
        .bind(team_id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(ServiceError::agent_not_found)?;
        Ok(Current {
            agent: agent_from_row(&row)?,
            instructions: row.try_get("instructions")?,
            version: row.try_get("instructions_version")?,
            updated_at: row.try_get("instructions_updated_at")?,
        })
    }

    async fn view(&self, current: Current) -> ServiceResult<Instructions> {
        let optimization = match jobs::latest(&self.db, OPTIMIZE_PROMPT, &current.agent.id).await? {
            Some(job) => PromptOptimization {
                version: job.payload["version"].as_i64().unwrap_or(current.version),
                completed_at_ms: (job.status == JobStatus::Completed).then_some(job.updated_at_ms),
                error: job.last_error.filter(|_| job.status == JobStatus::Failed),
                status: job.status.as_str().to_owned(),
            },
            // Completed jobs are pruned after a week; the runtime prompt tells what was built.
            None => {
                let built = self.built_version(&current.agent.id).await?;
                PromptOptimization {
                    status: JobStatus::Completed.as_str().to_owned(),
                    version: built.map_or(current.version, |(version, _)| version),
                    completed_at_ms: built.map(|(_, at)| at),
                    error: None,
                }
            }
        };
        Ok(Instructions {
            agent_id: current.agent.id,
            agent_name: current.agent.name,
            instructions: current.instructions,
            version: current.version,
            updated_at_ms: current.updated_at,
            optimization: Some(optimization),
        })
    }

    async fn built_version(&self, agent_id: &str) -> ServiceResult<Option<(i64, i64)>> {
        let row = sqlx::query("SELECT instructions_version, built_at FROM runtime_prompts WHERE agent_id = $1")
            .bind(agent_id)
            .fetch_optional(self.db.pool())
            .await?;
        Ok(match row {
            Some(row) => Some((row.try_get("instructions_version")?, row.try_get("built_at")?)),
            None => None,
        })
    }

    pub async fn instructions(&self, team_id: &str, agent_id: &str) -> ServiceResult<Instructions> {
        check_ids(&[("teamId", team_id), ("agentId", agent_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        let current = self.current(&mut conn, team_id, agent_id, false).await?;
        drop(conn);
        self.view(current).await
    }

    pub async fn replace_instructions(&self, team_id: &str, agent_id: &str, text: &str) -> ServiceResult<Instructions> {
        check_ids(&[("teamId", team_id), ("agentId", agent_id)])?;
        if let Some(violation) = switchboard_kit::limits::INSTRUCTIONS.check("instructions", text) {
            return Err(ServiceError::validation(vec![violation]));
        }
        self.set_instructions(team_id, agent_id, text, None).await
    }

    /// A new version with `text` and `settings` (`None`: the current ones): the version it
    /// replaces goes to the history, and a prompt-optimisation job is queued.
    async fn set_instructions(
        &self,
        team_id: &str,
        agent_id: &str,
        text: &str,
        settings: Option<AgentSettings>,
    ) -> ServiceResult<Instructions> {
        let mut tx = self.db.begin_write().await?;
        let previous = self.current(&mut tx, team_id, agent_id, true).await?;
        let settings = settings.unwrap_or_else(|| previous.agent.settings.clone().unwrap_or_default());
        let (version, now) = self.write_version(&mut tx, &previous, text, &settings).await?;
        jobs::enqueue(
            &mut tx,
            NewJob {
                kind: OPTIMIZE_PROMPT,
                team_id,
                subject_id: agent_id,
                payload: serde_json::json!({ "version": version }),
                max_attempts: 5,
            },
        )
        .await?;
        let current = self.current(&mut tx, team_id, agent_id, false).await?;
        // As `GET .../instructions` shows them now: their optimisation was just queued.
        let told = Instructions {
            agent_id: current.agent.id.clone(),
            agent_name: current.agent.name.clone(),
            instructions: current.instructions.clone(),
            version,
            updated_at_ms: now,
            optimization: Some(PromptOptimization {
                status: JobStatus::Queued.as_str().to_owned(),
                version,
                completed_at_ms: None,
                error: None,
            }),
        };
        let resource = switchboard_proto::v1::event::Resource::Instructions(told);
        switchboard_kit::outbox::record(&mut tx, EventType::AgentInstructionsUpdated, (team_id, agent_id), resource)
            .await?;
        self.record_change(&mut tx, team_id, agent_id, UPDATED).await?;
        tx.commit().await?;
        self.changed();
        self.view(current).await
    }

    /// Makes `text` and `settings` the next version: the current one (if any was ever set) goes
    /// to the history, which keeps the newest [`HISTORY_LIMIT`]. Returns the version and when.
    pub(super) async fn write_version(
        &self,
        tx: &mut sqlx::AnyConnection,
        previous: &Current,
        text: &str,
        settings: &AgentSettings,
    ) -> ServiceResult<(i64, i64)> {
        let (team_id, agent_id) = (previous.agent.team_id.as_str(), previous.agent.id.as_str());
        let now = now_ms();
        if previous.version > 0 {
            let previous_settings = previous.agent.settings.as_ref().and_then(settings::encode);
            sqlx::query(
                "INSERT INTO instruction_versions (agent_id, team_id, version, instructions, created_at, replaced_at, \
                 settings) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(agent_id)
            .bind(team_id)
            .bind(previous.version)
            .bind(&previous.instructions)
            .bind(previous.updated_at)
            .bind(now)
            .bind(previous_settings)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "DELETE FROM instruction_versions WHERE agent_id = $1 AND version NOT IN \
                 (SELECT version FROM instruction_versions WHERE agent_id = $1 ORDER BY version DESC LIMIT $2)",
            )
            .bind(agent_id)
            .bind(HISTORY_LIMIT)
            .execute(&mut *tx)
            .await?;
        }
        let version = previous.version + 1;
        sqlx::query(
            "UPDATE agents SET instructions = $1, instructions_version = $2, instructions_updated_at = $3, \
             updated_at = $3, settings = $4 WHERE id = $5 AND team_id = $6",
        )
        .bind(text)
        .bind(version)
        .bind(now)
        .bind(settings::encode(settings))
        .bind(agent_id)
        .bind(team_id)
        .execute(&mut *tx)
        .await?;
        Ok((version, now))
    }

    /// The saved versions, newest first.
    pub async fn history(&self, team_id: &str, agent_id: &str) -> ServiceResult<Vec<InstructionVersion>> {
        self.get(team_id, agent_id).await?;
        let rows = sqlx::query(&format!(
            "SELECT {VERSION_COLUMNS} FROM instruction_versions WHERE agent_id = $1 AND team_id = $2 \
             ORDER BY version DESC"
        ))
        .bind(agent_id)
        .bind(team_id)
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows.iter().map(version_from_row).collect::<Result<_, _>>()?)
    }

    /// One saved version of an agent's instructions.
    pub async fn instruction_version(
        &self,
        team_id: &str,
        agent_id: &str,
        version: i64,
    ) -> ServiceResult<InstructionVersion> {
        self.get(team_id, agent_id).await?;
        let row = sqlx::query(&format!(
            "SELECT {VERSION_COLUMNS} FROM instruction_versions WHERE agent_id = $1 AND team_id = $2 AND version = $3"
        ))
        .bind(agent_id)
        .bind(team_id)
        .bind(version)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(|| ServiceError::not_found("Instructions version not found"))?;
        Ok(version_from_row(&row)?)
    }

    /// Makes a saved version's instructions and settings current again (as a new version, so
    /// that the version being replaced is itself kept).
    pub async fn restore(&self, team_id: &str, agent_id: &str, version: i64) -> ServiceResult<Instructions> {
        let saved = self.instruction_version(team_id, agent_id, version).await?;
        self.set_instructions(team_id, agent_id, &saved.instructions, saved.settings).await
    }

    pub async fn runtime_prompt(&self, team_id: &str, agent_id: &str) -> ServiceResult<RuntimePrompt> {
        check_ids(&[("teamId", team_id), ("agentId", agent_id)])?;
        self.get(team_id, agent_id).await?;
        let row = sqlx::query(
            "SELECT agent_id, instructions_version, prompt, built_at FROM runtime_prompts \
             WHERE agent_id = $1 AND team_id = $2",
        )
        .bind(agent_id)
        .bind(team_id)
        .fetch_optional(self.db.pool())
        .await?
        .ok_or_else(|| ServiceError::not_found("The runtime prompt has not been built yet"))?;
        Ok(RuntimePrompt {
            agent_id: row.try_get("agent_id")?,
            instructions_version: row.try_get("instructions_version")?,
            prompt: row.try_get("prompt")?,
            built_at_ms: row.try_get("built_at")?,
        })
    }

    /// What the prompt job needs: the agent as it is now (not as it was when the job was
    /// queued), or `None` when it has been deleted since.
    pub(crate) async fn prompt_source(
        &self,
        team_id: &str,
        agent_id: &str,
    ) -> ServiceResult<Option<(Agent, String, i64)>> {
        let mut conn = self.db.pool().acquire().await?;
        match self.current(&mut conn, team_id, agent_id, false).await {
            Ok(current) => Ok(Some((current.agent, current.instructions, current.version))),
            Err(error) if error.kind == switchboard_kit::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Stores a built prompt unless a newer version is already stored, so that jobs
    /// finishing out of order never go backwards.
    pub(crate) async fn save_runtime_prompt(&self, agent: &Agent, version: i64, prompt: &str) -> ServiceResult<()> {
        let mut tx = self.db.begin_write().await?;
        let stored: Option<i64> = sqlx::query(&format!(
            "SELECT instructions_version FROM runtime_prompts WHERE agent_id = $1{}",
            self.db.for_update()
        ))
        .bind(&agent.id)
        .fetch_optional(&mut *tx)
        .await?
        .map(|row| row.try_get("instructions_version"))
        .transpose()?;
        let now = now_ms();
        match stored {
            Some(stored) if stored > version => {}
            Some(_) => {
                sqlx::query("UPDATE runtime_prompts SET instructions_version = $1, prompt = $2, built_at = $3 WHERE agent_id = $4")
                    .bind(version)
                    .bind(prompt)
                    .bind(now)
                    .bind(&agent.id)
                    .execute(&mut *tx)
                    .await?;
            }
            None => {
                sqlx::query(
                    "INSERT INTO runtime_prompts (agent_id, team_id, instructions_version, prompt, built_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(&agent.id)
                .bind(&agent.team_id)
                .bind(version)
                .bind(prompt)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
        }
        let stored_now = stored.is_none_or(|stored| stored <= version);
        if stored_now {
            self.record_change(&mut tx, &agent.team_id, &agent.id, UPDATED).await?;
        }
        tx.commit().await?;
        if stored_now {
            self.changed();
        }
        Ok(())
    }
}
