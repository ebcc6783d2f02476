//! The served OpenAPI document as a contract: every answer the test client receives is checked
//! against the schema the document gives for its operation and status, so a drift between the
//! code and its description fails the test that met it. An answer whose status the operation
//! does not document fails too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

/// The document of one running gateway, with a validator per (operation, status).
pub struct Contract {
    document: Value,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

/// One contract per gateway origin, fetched on first use.
fn contracts() -> &'static Mutex<HashMap<String, Arc<Contract>>> {
    static CONTRACTS: OnceLock<Mutex<HashMap<String, Arc<Contract>>>> = OnceLock::new();
    CONTRACTS.get_or_init(Default::default)
}

impl Contract {
    /// The contract of the gateway at `origin` (scheme, host and port).
    pub async fn of(origin: &str) -> Arc<Contract> {
        if let Some(contract) = contracts().lock().expect("contracts").get(origin) {
            return contract.clone();
        }
        let url = format!("{origin}/v1/openapi.json");
        let fetch = async { reqwest::get(&url).await?.json::<Value>().await };
        let document = tokio::time::timeout(std::time::Duration::from_secs(30), fetch)
            .await
            .unwrap_or_else(|_| panic!("fetching {url} timed out"))
            .unwrap_or_else(|error| panic!("fetching {url}: {error}"));
        let contract = Arc::new(Contract { document, validators: Mutex::default() });
        contracts().lock().expect("contracts").insert(origin.to_owned(), contract.clone());
        contract
    }

    /// The operation for `method` on a request path (the gateway's, e.g. `/v1/agents/...`).
    fn operation(&self, method: &str, path: &str) -> Option<(&str, &Value)> {
        let path = path.strip_prefix("/v1").filter(|rest| rest.starts_with('/')).unwrap_or(path);
        let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let method = if method == "HEAD" { "get".to_owned() } else { method.to_ascii_lowercase() };
        let paths = self.document["paths"].as_object()?;
        // Literal segments win over parameters, as the router's paths never overlap otherwise.
        let mut best: Option<(usize, &str, &Value)> = None;
        for (template, item) in paths {
            let segments: Vec<&str> = template.trim_start_matches('/').split('/').collect();
            if segments.len() != parts.len() {
                continue;
            }
            let mut literals = 0;
            let matches = segments.iter().zip(&parts).all(|(segment, part)| {
                if segment.starts_with('{') {
                    !part.is_empty()
                } else {
                    literals += 1;
                    segment == part
                }
            });
            // The most literal path is the route, whatever its methods: another method there
            // is the router's 405, not a different path's operation.
            if matches && best.is_none_or(|(most, ..)| literals > most) {
                best = Some((literals, template.as_str(), item));
            }
        }
        best.and_then(|(_, template, item)| Some((template, item.get(&method)?)))
    }

    /// Checks an answer; panics with what differs.
    pub fn check(&self, method: &str, path: &str, status: u16, content_type: Option<&str>, text: &str) {
        let Some((template, operation)) = self.operation(method, path) else {
            // No such operation (a 404 route, a 405 method): nothing is promised.
            return;
        };
        let at = format!("{method} {template} -> {status}");
        let responses = &operation["responses"];
        let Some(mut response) = responses.get(status.to_string()) else {
            panic!("{at}: the status is not documented; body: {text}");
        };
        if let Some(reference) = response.get("$ref").and_then(Value::as_str) {
            let name = reference.rsplit('/').next().unwrap_or_default();
            response = &self.document["components"]["responses"][name];
        }
        let Some(schema) = response.pointer("/content/application~1json/schema") else {
            return;
        };
        if !content_type.is_some_and(|t| t.starts_with("application/json")) {
            panic!("{at}: documented as JSON, answered {content_type:?}");
        }
        let body: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{at}: not JSON ({e}): {text}"));
        let validator = self.validator(&at, schema);
        let problems: Vec<String> =
            validator.iter_errors(&body).map(|error| format!("{} at {}", error, error.instance_path())).collect();
        assert!(problems.is_empty(), "{at}: the answer breaks its schema: {problems:#?}\nbody: {text}");
    }

    fn validator(&self, key: &str, schema: &Value) -> Arc<jsonschema::Validator> {
        if let Some(validator) = self.validators.lock().expect("validators").get(key) {
            return validator.clone();
        }
        // References point into the document's components: carry them along.
        let root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "allOf": [schema],
            "components": self.document["components"],
        });
        let validator = Arc::new(
            jsonschema::draft202012::options()
                .should_validate_formats(true)
                .build(&root)
                .unwrap_or_else(|error| panic!("{key}: the documented schema does not compile: {error}")),
        );
        self.validators.lock().expect("validators").insert(key.to_owned(), validator.clone());
        validator
    }
}
