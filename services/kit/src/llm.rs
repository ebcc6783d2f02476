//! An OpenAI-compatible chat model, when one is configured (`SWITCHBOARD_LLM_URL`,
//! `SWITCHBOARD_LLM_MODEL`, `SWITCHBOARD_LLM_API_KEY`): it writes the Q&A pairs of scraped and
//! uploaded content (the knowledgebase service) and answers the portal's "Try it" chat (the
//! agents service). The URL is the operator's, so it is reached directly, not through the
//! guard that keeps clients' URLs off private addresses.

use std::time::Duration;

use anyhow::{Context, anyhow};
use serde_json::Value;

/// The most bytes a streamed reply may take: far beyond any `max_tokens` a caller asks for, so
/// that only a broken endpoint reaches it.
const MAX_STREAM_BYTES: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct ChatConfig {
    /// Base URL, e.g. `https://api.openai.com/v1`; `/chat/completions` is appended.
    pub url: String,
    /// The model asked for when the caller names none, or one not in `models`.
    pub model: String,
    /// The models a caller may name (`SWITCHBOARD_LLM_MODELS`, comma-separated; `model` alone
    /// when unset): the operator pays for each, so an agent's settings cannot pick any.
    pub models: Vec<String>,
    pub api_key: Option<String>,
}

impl ChatConfig {
    pub fn from_env() -> Option<Self> {
        let url = std::env::var("SWITCHBOARD_LLM_URL").ok().filter(|v| !v.trim().is_empty())?;
        let model = std::env::var("SWITCHBOARD_LLM_MODEL")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| "gpt-4o-mini".to_owned());
        let listed = std::env::var("SWITCHBOARD_LLM_MODELS").unwrap_or_default();
        let mut models: Vec<String> =
            listed.split(',').map(str::trim).filter(|name| !name.is_empty()).map(str::to_owned).collect();
        if models.is_empty() {
            models.push(model.clone());
        }
        Some(Self {
            url,
            model,
            models,
            api_key: std::env::var("SWITCHBOARD_LLM_API_KEY").ok().filter(|v| !v.is_empty()),
        })
    }

    /// `wanted` when callers may name it, else the platform's model.
    pub fn model_for(&self, wanted: Option<&str>) -> &str {
        let wanted = wanted.map(str::trim);
        self.models.iter().find(|model| Some(model.as_str()) == wanted).unwrap_or(&self.model)
    }
}

pub struct ChatModel {
    client: reqwest::Client,
    config: ChatConfig,
}

/// A piece of a streamed reply.
#[derive(Debug, Default, PartialEq)]
pub struct Piece {
    pub text: String,
    /// Set on the last piece by models that say why they stopped.
    pub finish_reason: Option<String>,
}

impl ChatModel {
    /// `timeout` bounds a whole call, a streamed reply's last byte included.
    pub fn new(config: ChatConfig, timeout: Duration) -> anyhow::Result<Self> {
        // No redirects: a redirected POST would send the prompt, knowledge included, elsewhere.
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .build()
            .context("building the chat model's HTTP client")?;
        Ok(Self { client, config })
    }

    pub fn config(&self) -> &ChatConfig {
        &self.config
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let request =
            self.client.post(format!("{}/chat/completions", self.config.url.trim_end_matches('/'))).json(body);
        match &self.config.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// The model's whole answer to `body` (a `/chat/completions` request), as JSON.
    pub async fn complete(&self, body: &Value) -> anyhow::Result<Value> {
        let response = self.post(body).send().await.context("calling the chat model")?;
        let status = response.status();
        let reply: Value = response.json().await.context("reading the chat model's reply")?;
        anyhow::ensure!(status.is_success(), "the chat model answered {status}: {reply}");
        Ok(reply)
    }

    /// Sends `body` with `"stream": true`; the reply's pieces are then read from the answer.
    /// An answer that is not a success is an error here, with the model's own words.
    pub async fn stream(&self, body: &Value) -> anyhow::Result<ReplyStream> {
        let mut body = body.clone();
        body["stream"] = Value::Bool(true);
        let response = self.post(&body).send().await.context("calling the chat model")?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let text: String = text.chars().take(500).collect();
            return Err(anyhow!("the chat model answered {status}: {text}"));
        }
        // An endpoint that ignores `stream` answers the whole reply as JSON: one piece.
        let whole = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        Ok(ReplyStream { response, whole, buffer: Vec::new(), read: 0, done: false })
    }
}

/// A reply read as the model sends it: server-sent events of `chat.completion.chunk`s.
pub struct ReplyStream {
    response: reqwest::Response,
    whole: bool,
    buffer: Vec<u8>,
    read: usize,
    done: bool,
}

impl ReplyStream {
    /// The next piece with text or a finish reason; `None` once the reply has ended.
    pub async fn next(&mut self) -> anyhow::Result<Option<Piece>> {
        if self.done {
            return Ok(None);
        }
        if self.whole {
            self.done = true;
            let body = self.read_rest().await?;
            let reply: Value = serde_json::from_slice(&body).context("the chat model's reply is not JSON")?;
            let choice = &reply["choices"][0];
            let text = choice["message"]["content"].as_str().unwrap_or_default().to_owned();
            return Ok(Some(Piece { text, finish_reason: choice["finish_reason"].as_str().map(str::to_owned) }));
        }
        loop {
            while let Some(end) = self.buffer.iter().position(|&byte| byte == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                match event_line(&line)? {
                    Line::Nothing => {}
                    Line::Done => {
                        self.done = true;
                        return Ok(None);
                    }
                    Line::Piece(piece) => return Ok(Some(piece)),
                }
            }
            match self.chunk().await? {
                Some(bytes) => self.buffer.extend_from_slice(&bytes),
                None => {
                    self.done = true;
                    // A last line without its line end.
                    let line = std::mem::take(&mut self.buffer);
                    return match event_line(&line)? {
                        Line::Piece(piece) => Ok(Some(piece)),
                        Line::Nothing | Line::Done => Ok(None),
                    };
                }
            }
        }
    }

    async fn chunk(&mut self) -> anyhow::Result<Option<bytes::Bytes>> {
        let chunk = self.response.chunk().await.context("reading the chat model's reply")?;
        if let Some(bytes) = &chunk {
            self.read += bytes.len();
            anyhow::ensure!(
                self.read <= MAX_STREAM_BYTES,
                "the chat model's reply is longer than {MAX_STREAM_BYTES} bytes"
            );
        }
        Ok(chunk)
    }

    async fn read_rest(&mut self) -> anyhow::Result<Vec<u8>> {
        let mut body = std::mem::take(&mut self.buffer);
        while let Some(bytes) = self.chunk().await? {
            body.extend_from_slice(&bytes);
        }
        Ok(body)
    }
}

enum Line {
    Nothing,
    Done,
    Piece(Piece),
}

/// One line of the event stream: `data: {chunk}` gives a piece (or nothing, when the chunk has
/// no text and no finish reason), `data: [DONE]` ends it; comments and other fields are skipped.
fn event_line(line: &[u8]) -> anyhow::Result<Line> {
    let line = std::str::from_utf8(line).context("the chat model's reply is not UTF-8")?.trim();
    let Some(data) = line.strip_prefix("data:").map(str::trim) else {
        return Ok(Line::Nothing);
    };
    if data == "[DONE]" {
        return Ok(Line::Done);
    }
    let chunk: Value = serde_json::from_str(data).context("a piece of the chat model's reply is not JSON")?;
    if let Some(error) = chunk.get("error") {
        return Err(anyhow!("the chat model failed: {error}"));
    }
    let choice = &chunk["choices"][0];
    let text = choice["delta"]["content"].as_str().unwrap_or_default().to_owned();
    let finish_reason = choice["finish_reason"].as_str().map(str::to_owned);
    if text.is_empty() && finish_reason.is_none() {
        return Ok(Line::Nothing);
    }
    Ok(Line::Piece(Piece { text, finish_reason }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(line: &str) -> Option<Piece> {
        match event_line(line.as_bytes()).unwrap() {
            Line::Piece(piece) => Some(piece),
            _ => None,
        }
    }

    #[test]
    fn callers_name_only_listed_models() {
        let config = ChatConfig {
            url: "http://127.0.0.1:1".into(),
            model: "small".into(),
            models: vec!["small".into(), "large".into()],
            api_key: None,
        };
        assert_eq!(config.model_for(Some(" large ")), "large");
        assert_eq!(config.model_for(Some("o1-pro")), "small");
        assert_eq!(config.model_for(None), "small");
    }

    #[test]
    fn event_lines_give_text_finish_reasons_and_the_end() {
        let text = piece(r#"data: {"choices":[{"delta":{"content":"Hel"},"finish_reason":null}]}"#).unwrap();
        assert_eq!(text, Piece { text: "Hel".into(), finish_reason: None });
        let last = piece(r#"data:{"choices":[{"delta":{},"finish_reason":"stop"}]}"#).unwrap();
        assert_eq!(last.finish_reason.as_deref(), Some("stop"));
        assert!(piece(r#"data: {"choices":[{"delta":{"role":"assistant"}}]}"#).is_none(), "no text: skipped");
        assert!(piece(": keep-alive").is_none());
        assert!(piece("").is_none());
        assert!(matches!(event_line(b"data: [DONE]").unwrap(), Line::Done));
        assert!(event_line(br#"data: {"error":{"message":"overloaded"}}"#).is_err());
        assert!(event_line(b"data: {not json").is_err());
    }
}
