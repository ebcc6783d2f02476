//! `switchboard admin seed-demo`: fills a team with realistic calls and chats (and, in [`crm`],
//! contacts) through the
//! conversations service's ingestion gRPC API, exactly as voice and chat runtimes write them
//! (upsert, transcript appends, timeline events, a streamed recording, end), so that a new
//! platform has something to show and the ingestion path can be measured.
//!
//! External ids are `demo-<seed>-call-<n>` and `demo-<seed>-chat-<n>`: running it again with the
//! same seed on the same day rewrites the same conversations instead of adding more.

pub mod crm;
mod hostile;
mod script;

use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use switchboard_kit::grpc::{Channel, ServiceAccess};
use switchboard_kit::time::iso_ms;
use switchboard_proto::v1::conversation_ingest_client::ConversationIngestClient;
use switchboard_proto::v1::{
    AddCallEventRequest, AppendChatMessagesRequest, AppendTranscriptRequest, CallAnalysis, EndCallRequest,
    EndChatRequest, NewChatMessage, PutRecordingRequest, TranscriptSegment, UpsertCallRequest, UpsertChatRequest,
};

use script::TEAM_NUMBERS;

/// What to write.
#[derive(Debug, Clone)]
pub struct Plan {
    pub team: String,
    pub calls: u32,
    pub chats: u32,
    /// Transcript segments per call; by default each scenario's own length, a little varied.
    pub segments: Option<u32>,
    pub seed: u64,
    /// How many of the calls (the first ones, all answered and ended) get a recording, as long as
    /// the call.
    pub recordings: u32,
    /// The size of each recording: its sample rate is chosen so that it still lasts as long as its
    /// call (a large size is a high rate, for measuring ingestion). `None`: 8 kHz, 16,000 bytes a
    /// second of call.
    pub recording_kb: Option<u64>,
    /// How many CRM contacts the seed has (`crm::seed`): a call or chat is with one of them (on
    /// the contact's own number or address, greeting the contact by name) or with a stranger.
    pub contacts: u32,
    /// Conversations written at once.
    pub concurrency: usize,
    /// Transcript segments sent per append.
    pub append_batch: usize,
    /// Also a call and a chat made of HTML and script ([`hostile`]).
    pub hostile: bool,
}

pub(crate) const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// A recording stream's pieces.
const CHUNK: usize = 64 * 1024;

#[derive(Default)]
struct Written {
    calls: u64,
    segments: u64,
    events: u64,
    recordings: u64,
    recording_bytes: u64,
    chats: u64,
    messages: u64,
}

impl std::ops::AddAssign for Written {
    fn add_assign(&mut self, other: Self) {
        self.calls += other.calls;
        self.segments += other.segments;
        self.events += other.events;
        self.recordings += other.recordings;
        self.recording_bytes += other.recording_bytes;
        self.chats += other.chats;
        self.messages += other.messages;
    }
}

pub(crate) type Client = ConversationIngestClient<Channel>;

pub async fn run(url: &str, access: &ServiceAccess, plan: &Plan) -> anyhow::Result<Value> {
    let channel = switchboard_kit::grpc::channel(url, access, Duration::from_secs(600))?;
    let client = ConversationIngestClient::new(channel);
    // Days are counted back from the start of today, so that a second run the same day writes
    // the same times.
    let today = switchboard_kit::time::now_ms() / DAY_MS * DAY_MS;
    let started = Instant::now();
    let mut written = Written::default();
    let calls = futures::stream::iter(0..plan.calls)
        .map(|n| seed_call(client.clone(), plan, today, n))
        .buffer_unordered(plan.concurrency.max(1));
    written += calls
        .try_fold(Written::default(), |mut sum, one| async move {
            sum += one;
            Ok(sum)
        })
        .await?;
    let call_seconds = started.elapsed().as_secs_f64();
    let chats = futures::stream::iter(0..plan.chats)
        .map(|n| seed_chat(client.clone(), plan, today, n))
        .buffer_unordered(plan.concurrency.max(1));
    written += chats
        .try_fold(Written::default(), |mut sum, one| async move {
            sum += one;
            Ok(sum)
        })
        .await?;
    let hostile = if plan.hostile { Some(hostile::seed(client.clone(), plan, today).await?) } else { None };
    let seconds = started.elapsed().as_secs_f64();
    let per_second = |count: u64, seconds: f64| if seconds > 0.0 { (count as f64 / seconds).round() } else { 0.0 };
    Ok(json!({
        "teamId": plan.team,
        "calls": written.calls,
        "segments": written.segments,
        "events": written.events,
        "recordings": written.recordings,
        "recordingBytes": written.recording_bytes,
        "chats": written.chats,
        "messages": written.messages,
        "seconds": (seconds * 1000.0).round() / 1000.0,
        "callSeconds": (call_seconds * 1000.0).round() / 1000.0,
        "segmentsPerSecond": per_second(written.segments, call_seconds),
        "hostile": hostile,
    }))
}

/// Six conversations in ten are with one of the seed's contacts (when it has any).
fn known_contact(rng: &mut StdRng, plan: &Plan) -> Option<crm::Person> {
    (plan.contacts > 0 && rng.random_bool(0.6)).then(|| crm::person(plan.seed, rng.random_range(0..plan.contacts)))
}

/// The same conversation for the same seed and number, whatever order they are written in.
fn rng_for(plan: &Plan, kind: u64, n: u32) -> StdRng {
    StdRng::seed_from_u64(plan.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (kind << 32) ^ u64::from(n))
}

pub(crate) fn grpc_error(what: &str) -> impl Fn(tonic::Status) -> anyhow::Error + '_ {
    move |status| anyhow::anyhow!("{what}: {} ({:?})", status.message(), status.code())
}

async fn seed_call(mut client: Client, plan: &Plan, today: i64, n: u32) -> anyhow::Result<Written> {
    let mut rng = rng_for(plan, 1, n);
    let external_id = format!("demo-{}-call-{n}", plan.seed);
    let business = script::business(plan.seed);
    let incoming = rng.random_bool(0.75);
    // An outgoing call is one the agent makes: its own scripts, where the agent says who calls.
    let scenarios = if incoming { business.calls } else { business.outbound };
    let scenario = &scenarios[rng.random_range(0..scenarios.len())];
    // A contact calls from the contact's own number and gives the contact's name; a stranger's
    // number is in a range no contact has.
    let (theirs, name) = match known_contact(&mut rng, plan) {
        Some(person) => (person.number, person.first_name),
        None => (script::stranger_number(&mut rng), script::first_name(&mut rng).to_owned()),
    };
    let started_at = today - rng.random_range(0..90 * DAY_MS) - DAY_MS / 2;
    let ours = TEAM_NUMBERS[rng.random_range(0..TEAM_NUMBERS.len())];
    let (from, to) = if incoming { (theirs, ours.to_owned()) } else { (ours.to_owned(), theirs) };
    let outcome = rng.random_range(0..100);
    // A recorded call was answered and has ended: its recording is as long as it.
    let recorded = n < plan.recordings;
    let (answered, in_progress) = (recorded || outcome >= 5, !recorded && (5..8).contains(&outcome));
    let call = UpsertCallRequest {
        team_id: plan.team.clone(),
        external_id: external_id.clone(),
        agent_id: None,
        from,
        to,
        direction: if incoming { "INCOMING" } else { "OUTGOING" }.to_owned(),
        status: "in-progress".to_owned(),
        started_at: iso_ms(started_at),
    };
    client.upsert_call(call).await.map_err(grpc_error("upserting a call"))?;
    let mut written = Written { calls: 1, ..Written::default() };

    let count = if answered {
        plan.segments.map_or_else(|| scenario.turns.len() + rng.random_range(0..3), |count| count as usize)
    } else {
        0
    };
    let mut offset_ms = 1_000;
    let segments: Vec<TranscriptSegment> = script::turns(scenario, business, &name, count)
        .into_iter()
        .enumerate()
        .map(|(seq, (speaker, text))| {
            let segment = TranscriptSegment {
                seq: seq as i64 + 1,
                speaker: speaker.to_owned(),
                text,
                offset_ms,
                timestamp_ms: 0,
            };
            offset_ms += rng.random_range(2_000..9_000);
            segment
        })
        .collect();
    for batch in segments.chunks(plan.append_batch.max(1)) {
        let append = AppendTranscriptRequest {
            team_id: plan.team.clone(),
            external_id: external_id.clone(),
            segments: batch.to_vec(),
        };
        client.append_transcript(append).await.map_err(grpc_error("appending a transcript"))?;
        written.segments += batch.len() as u64;
    }

    let mut events = Vec::new();
    if answered {
        events.push(("answered", started_at + 1_000, json!({ "ringSeconds": rng.random_range(1..6) })));
        if let Some(tool) = scenario.tool {
            events.push(("tool_call", started_at + offset_ms / 2, json!({ "tool": tool, "ok": true })));
        }
    }
    let transferred = answered && scenario.outcome.transfer && !in_progress;
    if transferred {
        events.push(("transferred", started_at + offset_ms, json!({ "to": "+16285550142" })));
    }
    let ended_at = started_at + offset_ms + if answered { 2_000 } else { rng.random_range(5_000..25_000) };
    let caller_hung_up = rng.random_bool(0.7);
    if !in_progress {
        events.push(("hangup", ended_at, json!({ "by": if caller_hung_up { "caller" } else { "agent" } })));
    }
    for (kind, at, data) in events {
        let event = AddCallEventRequest {
            team_id: plan.team.clone(),
            external_id: external_id.clone(),
            r#type: kind.to_owned(),
            at: iso_ms(at),
            data: data.to_string(),
        };
        client.add_call_event(event).await.map_err(grpc_error("adding a call event"))?;
        written.events += 1;
    }

    if recorded {
        let bytes = plan.recording_kb.map(|kb| kb * 1024);
        let length_ms = u64::try_from(ended_at - started_at).context("a call that ends before it starts")?;
        written.recording_bytes += put_recording(&mut client, &plan.team, &external_id, length_ms, bytes).await?;
        written.recordings += 1;
    }
    if !in_progress {
        let end = EndCallRequest {
            team_id: plan.team.clone(),
            external_id,
            ended_at: iso_ms(ended_at),
            status: if answered { "completed" } else { "no-answer" }.to_owned(),
            summary: answered.then(|| script::fill(scenario.summary, business, Some(&name))),
            score: answered.then(|| f64::from(rng.random_range(55..99u8)) / 100.0),
            // What the transcript says, and how the timeline ends. No cost: seeding spends no
            // credits of the team's.
            analysis: answered.then(|| CallAnalysis {
                summary: None,
                sentiment: scenario.outcome.sentiment.to_owned(),
                successful: Some(scenario.outcome.successful),
                custom_json: String::new(),
            }),
            disconnection_reason: Some(
                match (answered, transferred, caller_hung_up) {
                    (false, _, _) => "no_answer",
                    (true, true, _) => "transfer",
                    (true, false, true) => "customer_hangup",
                    (true, false, false) => "agent_hangup",
                }
                .to_owned(),
            ),
            ..EndCallRequest::default()
        };
        client.end_call(end).await.map_err(grpc_error("ending a call"))?;
    }
    Ok(written)
}

/// A WAV file (a 440 Hz tone, 16-bit mono) that lasts `length_ms`, as the call it records: at
/// 8 kHz, or of about `bytes` bytes when given, at whatever sample rate makes it last as long.
/// Streamed in pieces as it is made: the service must never need the whole of it at once, and
/// neither does this. Answers its size.
pub(crate) async fn put_recording(
    client: &mut Client,
    team: &str,
    external_id: &str,
    length_ms: u64,
    bytes: Option<u64>,
) -> anyhow::Result<u64> {
    let length_ms = length_ms.max(1);
    let samples = match bytes {
        Some(bytes) => bytes.saturating_sub(44) / 2,
        None => length_ms * 8,
    };
    // The rate that makes `samples` last `length_ms`; what a player reads as the duration.
    let rate = u32::try_from((samples * 1000).div_ceil(length_ms).max(1)).context("a sample rate over 4 GHz")?;
    let data_bytes = u32::try_from(samples * 2).context("a recording over 4 GB")?;
    let mut header = Vec::with_capacity(44);
    header.extend_from_slice(b"RIFF");
    header.extend_from_slice(&(36 + data_bytes).to_le_bytes());
    header.extend_from_slice(b"WAVEfmt ");
    header.extend_from_slice(&16u32.to_le_bytes());
    header.extend_from_slice(&1u16.to_le_bytes());
    header.extend_from_slice(&1u16.to_le_bytes());
    header.extend_from_slice(&rate.to_le_bytes());
    header.extend_from_slice(&(rate * 2).to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&16u16.to_le_bytes());
    header.extend_from_slice(b"data");
    header.extend_from_slice(&data_bytes.to_le_bytes());
    // One period of the tone (at most `rate` samples), repeated: a long recording costs a copy
    // per sample, not a sine.
    let period: Vec<[u8; 2]> = {
        let per_period = (f64::from(rate) / 440.0).round().max(1.0) as usize;
        (0..per_period)
            .map(|i| ((i as f64 * std::f64::consts::TAU / per_period as f64).sin() * 8_000.0) as i16)
            .map(i16::to_le_bytes)
            .collect()
    };
    let chunk_samples = (CHUNK / 2) as u64;
    let pieces = samples.div_ceil(chunk_samples).max(1);
    let (team, external_id) = (team.to_owned(), external_id.to_owned());
    let stream = futures::stream::iter(0..pieces).map(move |piece| {
        let first = piece * chunk_samples;
        let mut data = if piece == 0 { header.clone() } else { Vec::with_capacity(CHUNK) };
        for sample in first..(first + chunk_samples).min(samples) {
            data.extend_from_slice(&period[(sample % period.len() as u64) as usize]);
        }
        let opening = piece == 0;
        PutRecordingRequest {
            team_id: if opening { team.clone() } else { String::new() },
            external_id: if opening { external_id.clone() } else { String::new() },
            content_type: if opening { "audio/wav".to_owned() } else { String::new() },
            data,
        }
    });
    client.put_recording(stream).await.map_err(grpc_error("streaming a recording"))?;
    Ok(44 + u64::from(data_bytes))
}

async fn seed_chat(mut client: Client, plan: &Plan, today: i64, n: u32) -> anyhow::Result<Written> {
    let mut rng = rng_for(plan, 2, n);
    let external_id = format!("demo-{}-chat-{n}", plan.seed);
    let business = script::business(plan.seed);
    let chat = &business.chats[rng.random_range(0..business.chats.len())];
    let channel = ["web", "web-agent", "voice-widget", "whatsapp"][rng.random_range(0..4)];
    let started_at = today - rng.random_range(0..90 * DAY_MS) - DAY_MS / 2;
    let by_phone = channel == "whatsapp" || rng.random_bool(0.3);
    // A contact writes from the contact's own number or address, and only then is the visitor
    // greeted by name (issue 40: a bare-number chat opened "Hi Priya").
    let (number, email, name) = match known_contact(&mut rng, plan) {
        Some(person) => match person.email {
            Some(email) if !by_phone => (None, Some(email), Some(person.first_name)),
            _ => (Some(person.number), None, Some(person.first_name)),
        },
        None if by_phone => (Some(script::stranger_number(&mut rng)), None, None),
        None => (None, Some(format!("visitor-{}-{n}@example.net", plan.seed)), None),
    };
    let upsert = UpsertChatRequest {
        team_id: plan.team.clone(),
        external_id: external_id.clone(),
        agent_id: None,
        channel: channel.to_owned(),
        contact_number: number,
        contact_email: email,
        started_at: iso_ms(started_at),
    };
    client.upsert_chat(upsert).await.map_err(grpc_error("upserting a chat"))?;
    let mut at = started_at;
    let messages: Vec<NewChatMessage> = chat
        .messages
        .iter()
        .enumerate()
        .map(|(index, (role, text))| {
            at += rng.random_range(5_000..90_000);
            NewChatMessage {
                external_id: format!("m{}", index + 1),
                role: (*role).to_owned(),
                text: script::fill(text, business, name.as_deref()),
                created_at: iso_ms(at),
            }
        })
        .collect();
    let count = messages.len() as u64;
    let append = AppendChatMessagesRequest { team_id: plan.team.clone(), external_id: external_id.clone(), messages };
    client.append_chat_messages(append).await.map_err(grpc_error("appending chat messages"))?;
    if rng.random_bool(0.8) {
        let end = EndChatRequest {
            team_id: plan.team.clone(),
            external_id,
            ended_at: iso_ms(at + 60_000),
            summary: Some(script::fill(chat.summary, business, None)),
        };
        client.end_chat(end).await.map_err(grpc_error("ending a chat"))?;
    }
    Ok(Written { chats: 1, messages: count, ..Written::default() })
}
