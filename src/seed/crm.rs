//! The CRM part of `seed-demo`: tags, a sales board with its stages, and contacts with notes,
//! written through the CRM service's gRPC API as any internal consumer would.
//!
//! Contact `n` of a seed always has the same number, so a second run creates nothing new (its
//! contacts fail with CONTACT_EXISTS and are counted as `existing`).

use std::time::Instant;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use switchboard_kit::grpc::Channel;
use switchboard_proto::v1::crm_service_client::CrmServiceClient;
use switchboard_proto::v1::{
    BulkCreateContactsRequest, ContactInput, CreateBoardRequest, ListBoardsRequest, StageInput, UpdateContactRequest,
};

const BOARD: &str = "Sales pipeline";
const STAGES: [&str; 5] = ["New", "Qualified", "Proposal", "Won", "Lost"];
const TAGS: [&str; 5] = ["VIP", "Lead", "Customer", "Churn risk", "Newsletter"];
/// Contacts per bulk request (the API's most).
const BATCH: usize = 1000;
/// Contacts moved along the board one by one, as a salesperson would.
const MOVED: u32 = 200;

const FIRST_NAMES: [&str; 32] = [
    "Grace", "Liam", "Sofia", "Noah", "Amara", "Mateo", "Chloé", "Kenji", "Priya", "Oliver", "Zanele", "Lukas", "Ada",
    "Alan", "Maya", "Ravi", "Elena", "Tomás", "Ingrid", "Yusuf", "Hannah", "Diego", "Mei", "Kwame", "Freya", "Arjun",
    "Lucía", "Emil", "Nadia", "Owen", "Sakura", "Tariq",
];
const LAST_NAMES: [&str; 32] = [
    "Hopper",
    "Lovelace",
    "Turing",
    "Okafor",
    "García",
    "Nakamura",
    "Patel",
    "Schmidt",
    "Johansson",
    "Dubois",
    "Kowalski",
    "Haddad",
    "Mensah",
    "Rossi",
    "Silva",
    "Novak",
    "Andersson",
    "Murphy",
    "Chen",
    "Kim",
    "Ivanova",
    "Fischer",
    "Moreau",
    "Costa",
    "Jensen",
    "Walsh",
    "Nguyen",
    "Hassan",
    "Bianchi",
    "Larsen",
    "Tanaka",
    "Reyes",
];
const AREAS: [&str; 8] = ["415", "628", "212", "312", "617", "303", "206", "512"];

/// The number of contact `n`: the fictional 555-01xx lines first, then other lines of the
/// same area codes once those run out (a large seed is synthetic data, never dialled).
fn number(seed: u64, n: u32) -> String {
    // Each seed has its own million contacts.
    let spread = u64::from(n) + seed.saturating_sub(1) * 1_000_000;
    let area = AREAS[(spread % 8) as usize];
    let line = spread / 8;
    if line < 100 {
        format!("+1{area}55501{line:02}")
    } else {
        let exchange = 200 + (line / 10_000) % 800;
        format!("+1{area}{exchange}{:04}", line % 10_000)
    }
}

fn contact(seed: u64, n: u32, board_id: &str) -> ContactInput {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(u64::from(n)));
    let first = FIRST_NAMES[rng.random_range(0..FIRST_NAMES.len())];
    let last = LAST_NAMES[rng.random_range(0..LAST_NAMES.len())];
    let mut tags: Vec<String> = TAGS.iter().filter(|_| rng.random_bool(0.25)).map(|t| (*t).to_owned()).collect();
    tags.sort();
    let email = rng.random_bool(0.8).then(|| format!("{}.{}{n}@example.com", ascii(first), ascii(last)));
    ContactInput {
        number: number(seed, n),
        first_name: Some(first.to_owned()),
        last_name: rng.random_bool(0.9).then(|| last.to_owned()),
        email,
        carrier: rng.random_bool(0.5).then(|| ["AT&T", "Verizon", "T-Mobile"][rng.random_range(0..3)].to_owned()),
        custom_fields: String::new(),
        tag_ids: Vec::new(),
        tag_names: tags,
        // About the seed's one business, as its calls and chats are.
        note: rng.random_bool(0.3).then(|| {
            let notes = super::script::business(seed).notes;
            notes[rng.random_range(0..notes.len())].to_owned()
        }),
        assign_user_ids: Vec::new(),
        board_ids: if rng.random_bool(0.5) { vec![board_id.to_owned()] } else { Vec::new() },
    }
}

/// What the conversations of a seed know of its contact `n`: the number, first name and e-mail
/// the CRM holds for it, so that a call or chat of a contact is on the contact's own number or
/// address and greets the contact by the contact's name.
pub struct Person {
    pub number: String,
    pub first_name: String,
    pub email: Option<String>,
}

pub fn person(seed: u64, n: u32) -> Person {
    let contact = contact(seed, n, "");
    Person { number: contact.number, first_name: contact.first_name.unwrap_or_default(), email: contact.email }
}

/// An e-mail's local part: lowercase ASCII letters of a name.
fn ascii(name: &str) -> String {
    name.to_lowercase().chars().filter(char::is_ascii_lowercase).collect()
}

/// The board of the demo, created the first time.
async fn board(client: &mut CrmServiceClient<Channel>, team: &str) -> anyhow::Result<switchboard_proto::v1::Board> {
    let boards = client.list_boards(ListBoardsRequest { team_id: team.to_owned() }).await?.into_inner().boards;
    if let Some(board) = boards.into_iter().find(|board| board.name == BOARD) {
        return Ok(board);
    }
    let stages =
        STAGES.iter().map(|name| StageInput { id: None, name: (*name).to_owned(), color: String::new() }).collect();
    let request = CreateBoardRequest { team_id: team.to_owned(), name: BOARD.to_owned(), stages };
    Ok(client.create_board(request).await?.into_inner())
}

/// Writes `count` contacts of `seed` into `team`.
pub async fn seed(channel: Channel, team: &str, seed: u64, count: u32) -> anyhow::Result<Value> {
    let mut client = CrmServiceClient::new(channel).max_decoding_message_size(64 * 1024 * 1024);
    let started = Instant::now();
    if count == 0 {
        return Ok(json!({ "contacts": 0, "existing": 0, "failed": 0, "seconds": 0.0 }));
    }
    let board = board(&mut client, team).await.context("creating the demo board")?;
    let (mut created, mut existing, mut failed) = (Vec::new(), 0u64, 0u64);
    let all: Vec<u32> = (0..count).collect();
    for batch in all.chunks(BATCH) {
        let contacts = batch.iter().map(|n| contact(seed, *n, &board.id)).collect();
        let request = BulkCreateContactsRequest { team_id: team.to_owned(), contacts, actor: "seed-demo".to_owned() };
        let answer = client.bulk_create_contacts(request).await.context("creating contacts")?.into_inner();
        for failure in &answer.failed {
            if failure.code == "CONTACT_EXISTS" {
                existing += 1;
            } else {
                failed += 1;
                tracing::warn!(code = failure.code, error = failure.error, "a demo contact was refused");
            }
        }
        created.extend(answer.created);
    }
    let seconds = started.elapsed().as_secs_f64();
    // Some contacts move along the pipeline, so that the board has a shape.
    let mut rng = StdRng::seed_from_u64(seed);
    for contact in created.iter().filter(|c| !c.board_ids.is_empty()).take(MOVED as usize) {
        let stage = &board.stages[rng.random_range(0..board.stages.len())];
        let request = UpdateContactRequest {
            team_id: team.to_owned(),
            contact_id: contact.id.clone(),
            crm_stage_id: Some(stage.id.clone()),
            ..UpdateContactRequest::default()
        };
        client.update_contact(request).await.context("moving a contact on the board")?;
    }
    let per_second = if seconds > 0.0 { (created.len() as f64 / seconds).round() } else { 0.0 };
    Ok(json!({
        "contacts": created.len(),
        "existing": existing,
        "failed": failed,
        "board": board.id,
        "seconds": (seconds * 1000.0).round() / 1000.0,
        "contactsPerSecond": per_second,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_distinct_and_fictional_first() {
        let numbers: std::collections::HashSet<String> = (0..20_000).map(|n| number(1, n)).collect();
        assert_eq!(numbers.len(), 20_000);
        assert!(number(1, 0).contains("55501"));
        // The team's own lines and the numbers of strangers are never a contact's (issue 40).
        for line in super::super::script::TEAM_NUMBERS {
            assert!(!numbers.contains(line), "{line} is a contact's");
        }
        assert!(numbers.iter().all(|n| !n.starts_with("+1929") && !n.starts_with("+1718") && !n.starts_with("+44")));
        let rules = switchboard_kit::phone::PhoneRules::for_region("US").unwrap();
        for n in [0, 799, 800, 19_999, 99_999] {
            assert_eq!(rules.normalise(&number(3, n)).unwrap(), number(3, n), "contact {n}");
        }
    }
}
