//! What a runtime reads to run an agent: `GetRuntimeConfig`, and the same for each change a
//! watch tells of.

use sqlx::Row;
use switchboard_kit::{ErrorKind, ServiceResult};
use switchboard_proto::v1::{RuntimeConfig, RuntimePrompt};

use super::{AgentStore, check_ids};

impl AgentStore {
    /// The agent with its settings, instructions and built prompt. `watch_version` is read
    /// first, so the config is at least as new as it: a runtime that resumes its watch from it
    /// misses nothing.
    pub async fn runtime_config(&self, team_id: &str, agent_id: &str) -> ServiceResult<RuntimeConfig> {
        check_ids(&[("teamId", team_id), ("agentId", agent_id)])?;
        let watch_version = self.watch_version().await?;
        let mut conn = self.db.pool().acquire().await?;
        let current = self.current(&mut conn, team_id, agent_id, false).await?;
        let prompt = sqlx::query(
            "SELECT agent_id, instructions_version, prompt, built_at FROM runtime_prompts \
             WHERE agent_id = $1 AND team_id = $2",
        )
        .bind(agent_id)
        .bind(team_id)
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| -> Result<RuntimePrompt, sqlx::Error> {
            Ok(RuntimePrompt {
                agent_id: row.try_get("agent_id")?,
                instructions_version: row.try_get("instructions_version")?,
                prompt: row.try_get("prompt")?,
                built_at_ms: row.try_get("built_at")?,
            })
        })
        .transpose()?;
        Ok(RuntimeConfig {
            agent: Some(current.agent),
            instructions: current.instructions,
            instructions_version: current.version,
            prompt,
            watch_version,
        })
    }

    /// The config, or `None` when the agent is gone.
    pub async fn runtime_config_if_any(&self, team_id: &str, agent_id: &str) -> ServiceResult<Option<RuntimeConfig>> {
        match self.runtime_config(team_id, agent_id).await {
            Ok(config) => Ok(Some(config)),
            Err(error) if error.kind == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }
}
