//! Q&A entries written by a chat model, when an OpenAI-compatible endpoint is configured
//! (`SWITCHBOARD_LLM_URL`, `SWITCHBOARD_LLM_MODEL`, `SWITCHBOARD_LLM_API_KEY`). Each section
//! is sent on its own and the model answers with JSON pairs; a section it cannot handle
//! falls back to the heading-based pairs, so a flaky model never loses content.

use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use super::html::Section;
use super::qa::{self, QaPair};

const SYSTEM_PROMPT: &str = "You turn a section of a web page or document into question and answer pairs \
for a customer-service knowledge base. Write the questions a customer would ask that the section answers, and \
answer each from the section only, completely and in the section's language. Reply with JSON only: \
{\"pairs\": [{\"question\": \"...\", \"answer\": \"...\"}]}. Reply {\"pairs\": []} when the section holds no \
useful facts.";

pub use switchboard_kit::llm::ChatConfig;
use switchboard_kit::llm::ChatModel;

pub struct ChatExtractor {
    model: ChatModel,
}

impl ChatExtractor {
    pub fn new(config: ChatConfig) -> anyhow::Result<Self> {
        Ok(Self { model: ChatModel::new(config, Duration::from_secs(60))? })
    }

    /// The pairs of every section; a section the model fails on keeps its heading pairs.
    pub async fn pairs(&self, title: Option<&str>, source_name: &str, sections: &[Section]) -> Vec<QaPair> {
        let mut pairs = Vec::new();
        for section in sections {
            match self.section_pairs(title, section).await {
                Ok(found) => pairs.extend(found),
                Err(error) => {
                    tracing::warn!(
                        error = format!("{error:#}"),
                        "the chat model failed on a section; using its heading"
                    );
                    pairs.extend(qa::from_sections(title, source_name, std::slice::from_ref(section)));
                }
            }
            if pairs.len() >= qa::MAX_ENTRIES {
                pairs.truncate(qa::MAX_ENTRIES);
                break;
            }
        }
        pairs
    }

    async fn section_pairs(&self, title: Option<&str>, section: &Section) -> anyhow::Result<Vec<QaPair>> {
        let mut content = String::new();
        if let Some(title) = title {
            content.push_str(&format!("Title: {title}\n"));
        }
        if let Some(heading) = &section.heading {
            content.push_str(&format!("Heading: {heading}\n"));
        }
        content.push('\n');
        content.push_str(&section.text);
        let body = json!({
            "model": self.model.config().model,
            "temperature": 0,
            "response_format": { "type": "json_object" },
            "messages": [
                { "role": "system", "content": SYSTEM_PROMPT },
                { "role": "user", "content": content },
            ],
        });
        let reply = self.model.complete(&body).await?;
        let text = reply["choices"][0]["message"]["content"].as_str().context("the reply has no message content")?;
        let parsed: Value = serde_json::from_str(strip_fences(text)).context("the model's content is not JSON")?;
        let pairs = parsed["pairs"].as_array().context("the model's JSON has no pairs array")?;
        Ok(pairs
            .iter()
            .filter_map(|pair| {
                let question = pair["question"].as_str()?.trim();
                let answer = pair["answer"].as_str()?.trim();
                (!question.is_empty() && !answer.is_empty()).then(|| QaPair {
                    question: question.chars().take(switchboard_kit::limits::QUESTION.max).collect(),
                    answer: answer.chars().take(switchboard_kit::limits::ANSWER.max).collect(),
                })
            })
            .collect())
    }
}

/// Some models wrap JSON in a Markdown code fence even when asked not to.
fn strip_fences(text: &str) -> &str {
    let text = text.trim();
    let text = text.strip_prefix("```json").or_else(|| text.strip_prefix("```")).unwrap_or(text);
    text.strip_suffix("```").unwrap_or(text).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_fences_are_removed() {
        assert_eq!(strip_fences("```json\n{\"pairs\": []}\n```"), "{\"pairs\": []}");
        assert_eq!(strip_fences(" {\"a\": 1} "), "{\"a\": 1}");
    }
}
