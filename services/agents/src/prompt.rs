//! The prompt-optimisation job: turns an agent's instructions into the runtime prompt that
//! its conversations use. The build is deterministic: the author's text, tidied (line ends,
//! trailing spaces, runs of blank lines), framed by what the runtime must know of the
//! agent: who it is, the channel it speaks on, and whether it has a knowledge base to
//! consult. It runs as a job so that a later, heavier optimiser (an LLM rewrite, say) can
//! take its place without changing the API or the write path.

use std::sync::Arc;

use switchboard_kit::jobs::{Job, JobHandler};
use switchboard_proto::v1::{Agent, AgentType};

use crate::store::AgentStore;
/// The job kind [`OptimizePrompt`] handles, next to its handler for whoever registers it.
pub use crate::store::OPTIMIZE_PROMPT;

pub fn build(agent: &Agent, instructions: &str) -> String {
    let mut prompt = String::new();
    prompt.push_str("# Role\n");
    prompt.push_str(&format!("You are {}", agent.name.trim()));
    match agent.description.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
        Some(description) => prompt.push_str(&format!(", {}.\n", description.trim_end_matches('.'))),
        None => prompt.push_str(".\n"),
    }
    prompt.push_str(match agent.r#type() {
        AgentType::Phone => {
            "You are speaking with a caller on the phone: answer in short spoken sentences, spell out \
             numbers and symbols, and never use markdown, lists or links.\n"
        }
        _ => "You are chatting in writing: keep paragraphs short; lists and links are fine.\n",
    });
    let instructions = tidy(instructions);
    if !instructions.is_empty() {
        prompt.push_str("\n# Instructions\n");
        prompt.push_str(&instructions);
        prompt.push('\n');
    }
    if agent.knowledgebase_id.is_some() {
        prompt.push_str(
            "\n# Knowledge\nWhen a question needs facts about the business, search the knowledge base and \
             answer from what it returns. When it has no answer, say so instead of guessing.\n",
        );
    }
    prompt
}

/// Normalises line ends, strips trailing spaces and keeps at most one blank line in a row.
fn tidy(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut lines: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim_end) {
        if line.is_empty() && lines.last().is_none_or(|last| last.is_empty()) {
            continue;
        }
        lines.push(line);
    }
    while lines.last().is_some_and(|line| line.is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

pub struct OptimizePrompt {
    pub store: AgentStore,
}

impl OptimizePrompt {
    pub fn new(store: AgentStore) -> Arc<Self> {
        Arc::new(Self { store })
    }
}

#[async_trait::async_trait]
impl JobHandler for OptimizePrompt {
    async fn run(&self, job: &Job) -> anyhow::Result<()> {
        let Some((agent, instructions, version)) = self.store.prompt_source(&job.team_id, &job.subject_id).await?
        else {
            return Ok(());
        };
        let prompt = build(&agent, &instructions);
        self.store.save_runtime_prompt(&agent, version, &prompt).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(agent_type: AgentType, knowledgebase: bool) -> Agent {
        Agent {
            id: "a".into(),
            name: "Ava".into(),
            description: Some("the front desk of Acme Dental".into()),
            r#type: agent_type.into(),
            knowledgebase_id: knowledgebase.then(|| "k".into()),
            ..Agent::default()
        }
    }

    #[test]
    fn phone_agents_are_told_to_speak_plainly() {
        let prompt = build(&agent(AgentType::Phone, false), "Greet callers.");
        assert!(prompt.starts_with("# Role\nYou are Ava, the front desk of Acme Dental.\n"));
        assert!(prompt.contains("never use markdown"));
        assert!(prompt.contains("# Instructions\nGreet callers.\n"));
        assert!(!prompt.contains("# Knowledge"));
    }

    #[test]
    fn a_knowledge_base_adds_its_guidance() {
        let prompt = build(&agent(AgentType::Chat, true), "Help.");
        assert!(prompt.contains("lists and links are fine"));
        assert!(prompt.contains("# Knowledge"));
    }

    #[test]
    fn text_is_tidied_but_kept() {
        assert_eq!(tidy("a  \r\n\r\n\r\n\nb\t\n\n"), "a\n\nb");
        assert_eq!(tidy("  indented\nkept"), "  indented\nkept");
    }
}
