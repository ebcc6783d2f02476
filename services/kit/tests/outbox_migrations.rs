//! Every service that tells events keeps its own copy of the `event_outbox` migration (sqlx
//! embeds one migrations folder per service), and `switchboard_kit::outbox` reads and writes
//! that table in all of them: the copies must stay the same, engine by engine.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

#[test]
fn every_service_creates_the_same_event_outbox() {
    let services = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // engine -> (DDL -> the files that hold it)
    let mut found: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for service in std::fs::read_dir(&services).unwrap() {
        let migrations = service.unwrap().path().join("migrations");
        let Ok(engines) = std::fs::read_dir(&migrations) else { continue };
        for engine in engines {
            let engine = engine.unwrap().path();
            for file in std::fs::read_dir(&engine).unwrap() {
                let file = file.unwrap().path();
                let text = std::fs::read_to_string(&file).unwrap();
                if text.contains("CREATE TABLE event_outbox") {
                    let name = engine.file_name().unwrap().to_string_lossy().into_owned();
                    let shown = file.strip_prefix(&services).unwrap().display().to_string();
                    found.entry(name).or_default().entry(text).or_default().push(shown);
                }
            }
        }
    }
    assert_eq!(found.keys().collect::<Vec<_>>(), ["postgres", "sqlite"]);
    for (engine, versions) in &found {
        let files: usize = versions.values().map(Vec::len).sum();
        assert!(files >= 5, "{engine}: expected the outbox in identity, agents, knowledgebase, conversations, crm");
        assert_eq!(versions.len(), 1, "{engine}: the event_outbox migrations differ: {:#?}", versions.values());
    }
}
