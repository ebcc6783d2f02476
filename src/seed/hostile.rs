//! `seed-demo --hostile`: one call and one chat whose every free text (transcript, summary,
//! timeline data, messages, contact e-mail's name) is HTML and script, as a caller or a chat
//! user could make it. The portal must show all of it as text; its browser tests open both.
//! The call has a recording as long as its transcript, so that every line can be played; the
//! chat has enough messages to need "load older".

use serde_json::{Value, json};
use switchboard_kit::time::iso_ms;
use switchboard_proto::v1::{
    AddCallEventRequest, AppendChatMessagesRequest, AppendTranscriptRequest, EndCallRequest, EndChatRequest,
    NewChatMessage, TranscriptSegment, UpsertCallRequest, UpsertChatRequest,
};

use super::{Client, DAY_MS, Plan, grpc_error, put_recording};

/// What a hostile visitor writes: markup that runs script if a page ever renders it as HTML.
pub const PAYLOADS: [&str; 3] = [
    "<img src=x onerror=window.__xss=1>",
    "<script>window.__xss=1</script>",
    "<a href=\"javascript:window.__xss=1\">hostile link</a>",
];
/// Transcript segments of the call, 4 s apart.
const SEGMENTS: i64 = 24;
const SEGMENT_MS: i64 = 4_000;
/// Messages of the chat: more than one page of the portal's thread.
const MESSAGES: usize = 120;

fn text(n: usize) -> String {
    format!("hostile {n}: {} and {}", PAYLOADS[n % PAYLOADS.len()], PAYLOADS[(n + 1) % PAYLOADS.len()])
}

/// Writes the call and the chat (the same ones again on a second run the same day) and
/// answers their ids.
pub async fn seed(mut client: Client, plan: &Plan, today: i64) -> anyhow::Result<Value> {
    let external_id = format!("demo-{}-hostile-call", plan.seed);
    let started_at = today - DAY_MS / 4;
    let call = UpsertCallRequest {
        team_id: plan.team.clone(),
        external_id: external_id.clone(),
        agent_id: None,
        // A stranger (no demo contact has this number) calling the team's first line.
        from: "+19295550123".to_owned(),
        to: super::script::TEAM_NUMBERS[0].to_owned(),
        direction: "INCOMING".to_owned(),
        status: "in-progress".to_owned(),
        started_at: iso_ms(started_at),
    };
    let call_id = client.upsert_call(call).await.map_err(grpc_error("upserting the hostile call"))?.into_inner().id;
    let segments = (0..SEGMENTS)
        .map(|n| TranscriptSegment {
            seq: n + 1,
            speaker: if n % 2 == 0 { "caller" } else { "agent" }.to_owned(),
            text: text(n as usize),
            offset_ms: 500 + n * SEGMENT_MS,
            timestamp_ms: 0,
        })
        .collect();
    let append = AppendTranscriptRequest { team_id: plan.team.clone(), external_id: external_id.clone(), segments };
    client.append_transcript(append).await.map_err(grpc_error("appending the hostile transcript"))?;
    let event = AddCallEventRequest {
        team_id: plan.team.clone(),
        external_id: external_id.clone(),
        r#type: "tool_call".to_owned(),
        at: iso_ms(started_at + 2_000),
        data: json!({ "tool": PAYLOADS[0], "note": PAYLOADS[1] }).to_string(),
    };
    client.add_call_event(event).await.map_err(grpc_error("adding the hostile event"))?;
    // As long as the transcript, and the call.
    let length_ms = 500 + SEGMENTS * SEGMENT_MS;
    put_recording(&mut client, &plan.team, &external_id, length_ms.unsigned_abs(), None).await?;
    let end = EndCallRequest {
        team_id: plan.team.clone(),
        external_id,
        ended_at: iso_ms(started_at + length_ms),
        status: "completed".to_owned(),
        summary: Some(format!("hostile summary {} {}", PAYLOADS[0], PAYLOADS[1])),
        score: Some(0.5),
        ..EndCallRequest::default()
    };
    client.end_call(end).await.map_err(grpc_error("ending the hostile call"))?;

    let external_id = format!("demo-{}-hostile-chat", plan.seed);
    let chat = UpsertChatRequest {
        team_id: plan.team.clone(),
        external_id: external_id.clone(),
        agent_id: None,
        channel: "web".to_owned(),
        contact_number: None,
        contact_email: Some("hostile@example.com".to_owned()),
        started_at: iso_ms(started_at),
    };
    let chat_id = client.upsert_chat(chat).await.map_err(grpc_error("upserting the hostile chat"))?.into_inner().id;
    let messages = (0..MESSAGES)
        .map(|n| NewChatMessage {
            external_id: format!("m{}", n + 1),
            role: if n % 2 == 0 { "user" } else { "agent" }.to_owned(),
            text: text(n),
            created_at: iso_ms(started_at + 1_000 * (n as i64 + 1)),
        })
        .collect();
    let append = AppendChatMessagesRequest { team_id: plan.team.clone(), external_id: external_id.clone(), messages };
    client.append_chat_messages(append).await.map_err(grpc_error("appending the hostile messages"))?;
    let end = EndChatRequest {
        team_id: plan.team.clone(),
        external_id,
        ended_at: iso_ms(started_at + 1_000 * (MESSAGES as i64 + 2)),
        summary: Some(format!("hostile chat summary {}", PAYLOADS[1])),
    };
    client.end_chat(end).await.map_err(grpc_error("ending the hostile chat"))?;
    Ok(json!({ "callId": call_id, "chatId": chat_id, "segments": SEGMENTS, "messages": MESSAGES }))
}
