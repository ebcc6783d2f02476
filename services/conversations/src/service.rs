//! The gRPC faces of the conversations service: `ConversationIngest` for the voice and chat
//! runtimes that record conversations, `ConversationsService` for the gateway that reads them.
//! Requests are checked and normalised here (times, enum values, E.164 numbers, the team and
//! the agent), then handed to the store.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use switchboard_kit::grpc::{Channel, Reply, reply};
use switchboard_kit::objects::Objects;
use switchboard_kit::{ErrorKind, FieldViolation, ServiceError, ServiceResult, limits, validate};
use switchboard_proto::v1::agents_service_client::AgentsServiceClient;
use switchboard_proto::v1::conversation_ingest_server::{ConversationIngest, ConversationIngestServer};
use switchboard_proto::v1::conversations_service_server::{ConversationsService, ConversationsServiceServer};
use switchboard_proto::v1::identity_service_client::IdentityServiceClient;
use switchboard_proto::v1::*;
use tonic::service::Routes;
use tonic::{Request, Status, Streaming};

use crate::analysis;
use crate::store::{
    AnalysisEnd, CallCost, CallEnd, CallFilter, CallFlags, CallSort, Channel as ChatChannel, ChatEnd, ChatFilter,
    ChatSort, ChatStatus, ConversationStore, Direction, DisconnectionReason, EXPORT_CHUNK, ExportCursor, NewCall,
    NewChat, NewEvent, NewMessage, NewSegment, RecordingMeta, Role, Sentiment, Speaker,
};
use switchboard_kit::phone::PhoneRules;
use switchboard_kit::recent::Recent;

/// How long a team or an agent that was found is trusted to still exist: ingestion calls come
/// in bursts for the same call, and a lookup per call would double their cost. As long as the
/// gateway trusts a key lookup, so that a deletion stops writes as soon as it stops reads.
const KNOWN_FOR: Duration = Duration::from_secs(2);
const KNOWN_MAX: usize = 10_000;

pub struct Peers {
    pub identity: IdentityServiceClient<Channel>,
    pub agents: AgentsServiceClient<Channel>,
}

#[derive(Clone)]
pub struct ConversationsApi {
    store: ConversationStore,
    phones: PhoneRules,
    peers: Arc<Peers>,
    /// Where recordings are kept.
    objects: Objects,
    /// Teams and (team, agent) pairs found recently.
    known: Arc<Recent<(String, String)>>,
}

/// Both services on one port.
pub fn routes(store: ConversationStore, phones: PhoneRules, peers: Peers, objects: Objects) -> Routes {
    let api = ConversationsApi {
        store,
        phones,
        peers: Arc::new(peers),
        objects,
        known: Arc::new(Recent::new(KNOWN_FOR, KNOWN_MAX)),
    };
    Routes::new(ConversationIngestServer::new(api.clone())).add_service(ConversationsServiceServer::new(api))
}

/// The audio types a recording may have, and the extension its object gets.
const AUDIO: [(&str, &str); 3] = [("audio/wav", "wav"), ("audio/mpeg", "mp3"), ("audio/ogg", "ogg")];

/// How long a signed playback URL of the object store works.
const PLAYBACK_FOR: Duration = Duration::from_secs(15 * 60);

/// Bytes per chunk of a recording read.
const READ_CHUNK: usize = 64 * 1024;

fn storage_failed(error: anyhow::Error) -> ServiceError {
    tracing::warn!(error = format!("{error:#}"), "object storage failed");
    ServiceError::unavailable("Recording storage is unavailable")
}

/// An RFC 3339 time as ms since the epoch, or a violation naming `field`.
fn time(field: &str, text: &str) -> Result<i64, FieldViolation> {
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|time| time.timestamp_millis())
        .map_err(|_| FieldViolation::new(field, "must be an RFC 3339 time, e.g. 2024-01-15T14:30:00Z"))
}

/// Collects the violations of a request while reading its fields.
#[derive(Default)]
struct Checks(Vec<FieldViolation>);

impl Checks {
    fn time(&mut self, field: &str, text: &str) -> i64 {
        time(field, text).unwrap_or_else(|violation| {
            self.0.push(violation);
            0
        })
    }

    fn one_of<T>(&mut self, field: &str, text: &str, parse: impl Fn(&str) -> Option<T>, allowed: &str) -> Option<T> {
        let parsed = parse(text);
        if parsed.is_none() {
            self.0.push(FieldViolation::new(field, format!("must be one of {allowed}")));
        }
        parsed
    }

    fn number(&mut self, phones: &PhoneRules, field: &str, text: &str) -> String {
        phones.normalise(text).unwrap_or_else(|message| {
            self.0.push(FieldViolation::new(field, message));
            String::new()
        })
    }

    fn finish(self) -> ServiceResult<()> {
        validate(self.0.into_iter().map(Some))
    }
}

impl ConversationsApi {
    /// NOT_FOUND unless the team exists and, when given, the agent is one of its agents.
    async fn check_owner(&self, team_id: &str, agent_id: Option<&str>) -> ServiceResult<()> {
        let team_key = (team_id.to_owned(), String::new());
        if !self.known.contains(&team_key).await {
            let team = self.peers.identity.clone().get_team(GetTeamRequest { team_id: team_id.to_owned() }).await?;
            if team.into_inner().deleted {
                return Err(ServiceError::team_not_found());
            }
            self.known.remember(team_key).await;
        }
        let Some(agent_id) = agent_id else {
            return Ok(());
        };
        let agent_key = (team_id.to_owned(), agent_id.to_owned());
        if !self.known.contains(&agent_key).await {
            let request = GetAgentRequest { team_id: team_id.to_owned(), agent_id: agent_id.to_owned() };
            self.peers.agents.clone().get_agent(request).await?;
            self.known.remember(agent_key).await;
        }
        Ok(())
    }

    /// The post-call analysis fields the call's agent declares: none for a call without an
    /// agent, or whose agent is gone or has no settings yet.
    async fn analysis_fields(&self, call: &Call) -> ServiceResult<Vec<AnalysisField>> {
        let Some(agent_id) = call.agent_id.clone() else {
            return Ok(Vec::new());
        };
        let request = GetAgentRequest { team_id: call.team_id.clone(), agent_id };
        match self.peers.agents.clone().get_agent(request).await {
            Ok(agent) => {
                Ok(agent.into_inner().settings.map(|settings| settings.post_call_analysis).unwrap_or_default())
            }
            Err(status) if status.code() == tonic::Code::NotFound => Ok(Vec::new()),
            Err(status) => Err(status.into()),
        }
    }

    /// Takes the call's cost from the team's balance, idempotently: the debit's reference is
    /// `call:<id>`, so a retry (or a concurrent EndCall) is answered the first debit. What the
    /// balance cannot cover is recorded as unpaid rather than refused: the call happened. A
    /// call whose cost is recorded already is not debited again: the store keeps that cost and
    /// refuses a different one.
    async fn pay(&self, call: &Call, credits: i64) -> ServiceResult<CallCost> {
        if call.cost_credits.is_some() || credits == 0 {
            return Ok(CallCost { credits, unpaid: 0, credit_entry_id: None });
        }
        let request = DebitCreditsRequest {
            team_id: call.team_id.clone(),
            amount: credits,
            reason: "call".to_owned(),
            reference_id: Some(format!("call:{}", call.id)),
            up_to_balance: true,
        };
        let entry = self.peers.identity.clone().debit_credits(request).await?.into_inner();
        Ok(CallCost { credits, unpaid: credits + entry.delta, credit_entry_id: Some(entry.id) })
    }

    /// NOT_FOUND unless the team exists: a deleted team's conversations take no more writes.
    async fn check_team(&self, team_id: &str) -> ServiceResult<()> {
        Self::check_ids(team_id, None)?;
        self.check_owner(team_id, None).await
    }

    /// Removes a recording's object; a failure leaves an orphan object, logged, not an error for
    /// the caller whose change is already committed.
    async fn delete_object(&self, key: &str) {
        if let Err(error) = self.objects.delete(key).await {
            tracing::warn!(error = format!("{error:#}"), key, "a recording object could not be removed");
        }
    }

    /// Fills in playback URLs where the object store signs them.
    async fn sign_playback(&self, calls: &mut [Call]) {
        for recording in calls.iter_mut().filter_map(|call| call.recording.as_mut()) {
            match self.objects.signed_url(&recording.object_key, PLAYBACK_FOR).await {
                Ok(url) => recording.playback_url = url,
                Err(error) => tracing::warn!(error = format!("{error:#}"), "signing a playback URL failed"),
            }
        }
    }

    /// Ids are checked before a lookup in another service is spent on them.
    fn check_ids(team_id: &str, agent_id: Option<&str>) -> ServiceResult<()> {
        let is_uuid = |id: &str| uuid::Uuid::parse_str(id).is_ok();
        validate([
            (!is_uuid(team_id)).then(|| FieldViolation::new("teamId", "must be a UUID")),
            agent_id.filter(|id| !is_uuid(id)).map(|_| FieldViolation::new("agentId", "must be a UUID")),
        ])
    }

    fn page(page: Option<PageRequest>) -> PageRequest {
        let mut page = page.unwrap_or_default();
        if page.page == 0 {
            page.page = 1;
        }
        if page.limit == 0 {
            page.limit = u32::try_from(limits::PAGE_LIMIT.default).unwrap_or(20);
        }
        page
    }
}

#[tonic::async_trait]
impl ConversationIngest for ConversationsApi {
    async fn upsert_call(&self, request: Request<UpsertCallRequest>) -> Reply<Call> {
        let request = request.into_inner();
        let mut checks = Checks::default();
        let from = checks.number(&self.phones, "from", &request.from);
        let to = checks.number(&self.phones, "to", &request.to);
        let direction = checks.one_of("direction", &request.direction, Direction::parse, "INCOMING, OUTGOING");
        let started_at_ms = checks.time("startedAt", &request.started_at);
        checks.finish()?;
        Self::check_ids(&request.team_id, request.agent_id.as_deref())?;
        self.check_owner(&request.team_id, request.agent_id.as_deref()).await?;
        let call = NewCall {
            external_id: request.external_id,
            agent_id: request.agent_id,
            from,
            to,
            direction: direction.unwrap_or(Direction::Incoming),
            status: request.status,
            started_at_ms,
        };
        reply(self.store.upsert_call(&request.team_id, call).await)
    }

    async fn append_transcript(&self, request: Request<AppendTranscriptRequest>) -> Reply<AppendResponse> {
        let request = request.into_inner();
        let mut checks = Checks::default();
        let segments: Vec<NewSegment> = request
            .segments
            .into_iter()
            .enumerate()
            .map(|(index, segment)| NewSegment {
                seq: segment.seq,
                speaker: checks
                    .one_of(&format!("segments[{index}].speaker"), &segment.speaker, Speaker::parse, "agent, caller")
                    .unwrap_or(Speaker::Agent),
                text: segment.text,
                offset_ms: segment.offset_ms,
            })
            .collect();
        checks.finish()?;
        self.check_team(&request.team_id).await?;
        let appended = self.store.append_transcript(&request.team_id, &request.external_id, segments).await;
        reply(appended.map(|done| AppendResponse { appended: done.appended, total: done.total }))
    }

    async fn add_call_event(&self, request: Request<AddCallEventRequest>) -> Reply<CallEvent> {
        let request = request.into_inner();
        let mut checks = Checks::default();
        let at_ms = checks.time("at", &request.at);
        checks.finish()?;
        self.check_team(&request.team_id).await?;
        let data = if request.data.trim().is_empty() { "{}".to_owned() } else { request.data };
        let event = NewEvent { kind: request.r#type, at_ms, data };
        reply(self.store.add_call_event(&request.team_id, &request.external_id, event).await)
    }

    /// The audio goes to object storage as it arrives (never whole in memory), under a key of
    /// its own; the call points at it once it is complete, and a recording it replaces is
    /// removed then.
    async fn put_recording(&self, request: Request<Streaming<PutRecordingRequest>>) -> Reply<Recording> {
        let mut stream = request.into_inner();
        let first = stream
            .message()
            .await?
            .ok_or_else(|| ServiceError::invalid_field("data", "the stream carried no message"))?;
        let content_type = first.content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        let Some((_, extension)) = AUDIO.iter().find(|(known, _)| *known == content_type) else {
            return reply(Err(ServiceError::invalid_field(
                "contentType",
                "must be one of audio/wav, audio/mpeg, audio/ogg",
            )));
        };
        self.check_team(&first.team_id).await?;
        let call = self.store.call_by_external_id(&first.team_id, &first.external_id).await?;
        let key = format!("recordings/{}/{}/{}.{extension}", call.team_id, call.id, uuid::Uuid::now_v7());
        let mut writing = self.objects.writer(&key).await.map_err(storage_failed)?;
        let mut next = Some(first);
        while let Some(message) = next {
            let named_elsewhere = (!message.team_id.is_empty() && message.team_id != call.team_id)
                || (!message.external_id.is_empty() && message.external_id != call.external_id);
            let too_large = writing.written() + message.data.len() as u64 > limits::RECORDING_BYTES as u64;
            if named_elsewhere || too_large {
                writing.abort().await;
                return reply(Err(if too_large {
                    ServiceError::new(ErrorKind::PayloadTooLarge, "The recording is larger than 200 MB")
                } else {
                    ServiceError::invalid_field("externalId", "every message of the stream must name the same call")
                }));
            }
            if let Err(error) = writing.write(message.data.into()).await {
                writing.abort().await;
                return reply(Err(storage_failed(error)));
            }
            next = match stream.message().await {
                Ok(next) => next,
                Err(status) => {
                    writing.abort().await;
                    return Err(status);
                }
            };
        }
        if writing.written() == 0 {
            writing.abort().await;
            return reply(Err(ServiceError::invalid_field("data", "the recording is empty")));
        }
        let size_bytes = i64::try_from(writing.finish().await.map_err(storage_failed)?).unwrap_or(i64::MAX);
        let meta = RecordingMeta { object_key: key.clone(), content_type: content_type.clone(), size_bytes };
        let previous = match self.store.set_recording(&call.team_id, &call.external_id, meta).await {
            Ok(previous) => previous,
            Err(error) => {
                self.delete_object(&key).await;
                return reply(Err(error));
            }
        };
        if let Some(previous) = previous.filter(|previous| previous.object_key != key) {
            self.delete_object(&previous.object_key).await;
        }
        reply(Ok(Recording { content_type, size_bytes, object_key: key, playback_url: None }))
    }

    /// Checks everything, then the custom analysis against the call's agent, then takes the
    /// cost (once: see [`ConversationsApi::pay`]), then writes the end. Nothing is written when
    /// a check fails; when identity is unavailable the EndCall fails UNAVAILABLE and a retry
    /// is safe.
    async fn end_call(&self, request: Request<EndCallRequest>) -> Reply<Call> {
        let request = request.into_inner();
        let mut checks = Checks::default();
        let ended_at_ms = checks.time("endedAt", &request.ended_at);
        if request.score.is_some_and(|score| !score.is_finite()) {
            checks.0.push(FieldViolation::new("score", "must be a number"));
        }
        let reason = request.disconnection_reason.as_deref().and_then(|text| {
            checks.one_of("disconnectionReason", text, DisconnectionReason::parse, DisconnectionReason::NAMES)
        });
        if request.cost_credits.is_some_and(|cost| cost < 0) {
            checks.0.push(FieldViolation::new("costCredits", "must be 0 or more"));
        }
        let mut summary = request.summary;
        let analysis = request.analysis.map(|analysis| {
            let sentiment = match analysis.sentiment.as_str() {
                "" => Some(Sentiment::Unknown),
                text => checks.one_of("analysis.sentiment", text, Sentiment::parse, Sentiment::NAMES),
            };
            let custom = analysis::parse(&analysis.custom_json).unwrap_or_else(|violation| {
                checks.0.push(violation);
                serde_json::Map::new()
            });
            if analysis.summary.is_some() {
                summary = analysis.summary;
            }
            (sentiment.unwrap_or(Sentiment::Unknown), analysis.successful, custom)
        });
        checks.finish()?;
        self.check_team(&request.team_id).await?;
        let has_custom = analysis.as_ref().is_some_and(|(_, _, custom)| !custom.is_empty());
        let custom = analysis.as_ref().filter(|_| has_custom).map(|(_, _, custom)| custom.clone());
        let mut end = CallEnd {
            analysis: analysis.map(|(sentiment, successful, custom)| AnalysisEnd {
                sentiment,
                successful,
                custom: serde_json::Value::Object(custom).to_string(),
            }),
            disconnection_reason: reason,
            ..CallEnd::plain(ended_at_ms, request.status, summary, request.score)
        };
        if has_custom || request.cost_credits.is_some() {
            // What the store would refuse is refused before the agent is asked or the cost taken.
            crate::store::check_end(&request.external_id, &end)?;
            let current = self.store.call_head(&request.team_id, &request.external_id).await?;
            if ended_at_ms < current.started_at_ms {
                return reply(Err(ServiceError::invalid_field("endedAt", "must not be before the call's start")));
            }
            if let Some(custom) = &custom {
                let fields = self.analysis_fields(&current).await?;
                validate(analysis::check(custom, &fields).into_iter().map(Some))?;
            }
            if let Some(credits) = request.cost_credits {
                end.cost = Some(self.pay(&current, credits).await?);
            }
        }
        reply(self.store.end_call(&request.team_id, &request.external_id, end).await)
    }

    async fn upsert_chat(&self, request: Request<UpsertChatRequest>) -> Reply<Chat> {
        let request = request.into_inner();
        let mut checks = Checks::default();
        let channel =
            checks.one_of("channel", &request.channel, ChatChannel::parse, "web, web-agent, voice-widget, whatsapp");
        let contact_number =
            request.contact_number.as_deref().map(|number| checks.number(&self.phones, "contactNumber", number));
        if let Some(email) = request.contact_email.as_deref()
            && !limits::is_email(email)
        {
            checks.0.push(FieldViolation::new("contactEmail", "must be a valid e-mail address"));
        }
        let started_at_ms = checks.time("startedAt", &request.started_at);
        checks.finish()?;
        Self::check_ids(&request.team_id, request.agent_id.as_deref())?;
        self.check_owner(&request.team_id, request.agent_id.as_deref()).await?;
        let chat = NewChat {
            external_id: request.external_id,
            agent_id: request.agent_id,
            channel: channel.unwrap_or(ChatChannel::Web),
            contact_number,
            contact_email: request.contact_email.map(|email| email.trim().to_lowercase()),
            started_at_ms,
        };
        reply(self.store.upsert_chat(&request.team_id, chat).await)
    }

    async fn append_chat_messages(&self, request: Request<AppendChatMessagesRequest>) -> Reply<AppendResponse> {
        let request = request.into_inner();
        let mut checks = Checks::default();
        let messages: Vec<NewMessage> = request
            .messages
            .into_iter()
            .enumerate()
            .map(|(index, message)| NewMessage {
                role: checks
                    .one_of(&format!("messages[{index}].role"), &message.role, Role::parse, "user, agent, system")
                    .unwrap_or(Role::User),
                created_at_ms: checks.time(&format!("messages[{index}].createdAt"), &message.created_at),
                external_id: message.external_id,
                text: message.text,
            })
            .collect();
        checks.finish()?;
        self.check_team(&request.team_id).await?;
        let appended = self.store.append_chat_messages(&request.team_id, &request.external_id, messages).await;
        reply(appended.map(|done| AppendResponse { appended: done.appended, total: done.total }))
    }

    async fn end_chat(&self, request: Request<EndChatRequest>) -> Reply<Chat> {
        let request = request.into_inner();
        let mut checks = Checks::default();
        let ended_at_ms = checks.time("endedAt", &request.ended_at);
        checks.finish()?;
        self.check_team(&request.team_id).await?;
        let end = ChatEnd { ended_at_ms, summary: request.summary };
        reply(self.store.end_chat(&request.team_id, &request.external_id, end).await)
    }
}

impl ConversationsApi {
    /// The list's filters, checked, with the team; a list's page and sort come with them.
    /// A chat list's filter, every problem of the request at once.
    fn chat_filter(request: ListChatsRequest) -> ServiceResult<(String, ChatFilter)> {
        let page = Self::page(request.page);
        let mut checks = Checks::default();
        let channel = request.channel.as_deref().and_then(|text| {
            checks.one_of("channel", text, ChatChannel::parse, "web, web-agent, voice-widget, whatsapp")
        });
        let status = request
            .status
            .as_deref()
            .and_then(|text| checks.one_of("status", text, ChatStatus::parse, "active, ended"));
        let sort = match page.sort_by.as_str() {
            "" | "createdAt" => ChatSort::CreatedAt,
            "lastMessageAt" => ChatSort::LastMessageAt,
            _ => {
                checks.0.push(FieldViolation::new("sortBy", "must be one of createdAt, lastMessageAt"));
                ChatSort::CreatedAt
            }
        };
        checks.finish()?;
        let filter = ChatFilter {
            page: page.page,
            limit: page.limit,
            search: request.search,
            channel,
            agent_id: request.agent_id,
            status,
            created_from_ms: request.created_from_ms,
            created_to_ms: request.created_to_ms,
            sort,
            ascending: page.ascending,
        };
        Ok((request.team_id, filter))
    }

    fn call_filter(&self, request: ListCallsRequest) -> ServiceResult<(String, CallFilter)> {
        let page = Self::page(request.page);
        let mut checks = Checks::default();
        let direction = request
            .direction
            .as_deref()
            .and_then(|text| checks.one_of("callType", text, Direction::parse, "INCOMING, OUTGOING"));
        let number = request.number.as_deref().map(|number| checks.number(&self.phones, "number", number));
        let sentiment = request
            .sentiment
            .as_deref()
            .and_then(|text| checks.one_of("sentiment", text, Sentiment::parse, Sentiment::NAMES));
        let disconnection_reason = request.disconnection_reason.as_deref().and_then(|text| {
            checks.one_of("disconnectionReason", text, DisconnectionReason::parse, DisconnectionReason::NAMES)
        });
        let sort = match page.sort_by.as_str() {
            "" | "createdAt" => CallSort::CreatedAt,
            "duration" => CallSort::Duration,
            "endedAt" => CallSort::EndedAt,
            _ => {
                checks.0.push(FieldViolation::new("sortBy", "must be one of createdAt, duration, endedAt"));
                CallSort::CreatedAt
            }
        };
        checks.finish()?;
        let filter = CallFilter {
            page: page.page,
            limit: page.limit,
            search: request.search,
            direction,
            agent_id: request.agent_id,
            min_duration: request.min_duration,
            max_duration: request.max_duration,
            created_from_ms: request.created_from_ms,
            created_to_ms: request.created_to_ms,
            number,
            sentiment,
            successful: request.successful,
            disconnection_reason,
            sort,
            ascending: page.ascending,
        };
        Ok((request.team_id, filter))
    }
}

#[tonic::async_trait]
impl ConversationsService for ConversationsApi {
    async fn list_calls(&self, request: Request<ListCallsRequest>) -> Reply<ListCallsResponse> {
        let (team_id, filter) = self.call_filter(request.into_inner())?;
        let (mut calls, page) = self.store.list_calls(&team_id, &filter).await?;
        self.sign_playback(&mut calls).await;
        reply(Ok(ListCallsResponse { calls, page: Some(page) }))
    }

    async fn get_call_analytics(&self, request: Request<CallAnalyticsRequest>) -> Reply<CallAnalyticsResponse> {
        let request = request.into_inner();
        let range = (request.from_ms, request.to_ms);
        let days = self.store.call_analytics(&request.team_id, range, request.agent_id.as_deref()).await?;
        reply(Ok(CallAnalyticsResponse { days }))
    }

    type ExportCallsStream = tokio_stream::wrappers::ReceiverStream<Result<ExportCallsChunk, Status>>;

    /// Pages are read one at a time, as the gateway takes them: the channel holds one chunk
    /// ahead, so a slow client slows the reads instead of filling memory.
    async fn export_calls(&self, request: Request<ListCallsRequest>) -> Reply<Self::ExportCallsStream> {
        let (team_id, filter) = self.call_filter(request.into_inner())?;
        let custom_names = self.store.export_custom_names(&team_id, &filter).await?;
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        let store = self.store.clone();
        tokio::spawn(async move {
            let mut after: Option<ExportCursor> = None;
            let mut names = custom_names;
            loop {
                let page = store.export_page(&team_id, &filter, after.as_ref()).await;
                let chunk = page.map(|calls| {
                    after = calls
                        .last()
                        .map(|call| ExportCursor { started_at_ms: call.started_at_ms, id: call.id.clone() });
                    ExportCallsChunk { custom_names: std::mem::take(&mut names), calls }
                });
                let last = chunk.as_ref().map_or(true, |chunk| chunk.calls.len() < EXPORT_CHUNK as usize);
                if sender.send(chunk.map_err(Status::from)).await.is_err() || last {
                    return;
                }
            }
        });
        reply(Ok(tokio_stream::wrappers::ReceiverStream::new(receiver)))
    }

    async fn get_call(&self, request: Request<GetCallRequest>) -> Reply<Call> {
        let request = request.into_inner();
        let mut call = self.store.call(&request.team_id, &request.call_id).await?;
        self.sign_playback(std::slice::from_mut(&mut call)).await;
        reply(Ok(call))
    }

    async fn update_call(&self, request: Request<UpdateCallRequest>) -> Reply<Call> {
        let request = request.into_inner();
        let flags = CallFlags { flagged: request.flagged, favorite: request.favorite, spam: request.spam };
        reply(self.store.update_call_flags(&request.team_id, &request.call_id, flags).await)
    }

    async fn delete_call(&self, request: Request<GetCallRequest>) -> Reply<Call> {
        let request = request.into_inner();
        let deleted = self.store.delete_call(&request.team_id, &request.call_id).await?;
        if let Some(recording) = &deleted.recording {
            self.delete_object(&recording.object_key).await;
        }
        reply(Ok(deleted))
    }

    type ReadRecordingStream = tokio_stream::wrappers::ReceiverStream<Result<RecordingChunk, Status>>;

    async fn read_recording(&self, request: Request<ReadRecordingRequest>) -> Reply<Self::ReadRecordingStream> {
        let request = request.into_inner();
        let call = self.store.call(&request.team_id, &request.call_id).await?;
        let recording = call.recording.ok_or_else(ServiceError::recording_not_found)?;
        let size = u64::try_from(recording.size_bytes).unwrap_or_default();
        if request.offset >= size {
            return reply(Err(ServiceError::invalid_field("offset", format!("must be below the size, {size}"))));
        }
        let end = if request.length == 0 { size } else { request.offset.saturating_add(request.length).min(size) };
        let (_, mut bytes) =
            self.objects.read(&recording.object_key, Some(request.offset..end)).await.map_err(storage_failed)?;
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut first = Some((recording.content_type, size));
            while let Some(read) = bytes.next().await {
                let chunks: Vec<Result<RecordingChunk, Status>> = match read {
                    Ok(data) => data
                        .chunks(READ_CHUNK)
                        .map(|piece| {
                            let (content_type, size_bytes) = first.take().unwrap_or_default();
                            Ok(RecordingChunk { data: piece.to_vec(), content_type, size_bytes })
                        })
                        .collect(),
                    Err(error) => vec![Err(storage_failed(error).into())],
                };
                for chunk in chunks {
                    let failed = chunk.is_err();
                    if sender.send(chunk).await.is_err() || failed {
                        return;
                    }
                }
            }
        });
        reply(Ok(tokio_stream::wrappers::ReceiverStream::new(receiver)))
    }

    async fn list_chats(&self, request: Request<ListChatsRequest>) -> Reply<ListChatsResponse> {
        let (team_id, filter) = Self::chat_filter(request.into_inner())?;
        let listed = self.store.list_chats(&team_id, &filter).await;
        reply(listed.map(|(chats, page)| ListChatsResponse { chats, page: Some(page) }))
    }

    type ExportChatsStream = tokio_stream::wrappers::ReceiverStream<Result<ExportChatsChunk, Status>>;

    /// As `export_calls`: one page read at a time, as the gateway takes them.
    async fn export_chats(&self, request: Request<ListChatsRequest>) -> Reply<Self::ExportChatsStream> {
        let (team_id, filter) = Self::chat_filter(request.into_inner())?;
        // The first page is read here, so that a refused filter is the call's status.
        let first = self.store.export_chat_page(&team_id, &filter, None).await?;
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        let store = self.store.clone();
        tokio::spawn(async move {
            let mut page = Ok(first);
            loop {
                let chunk = page.map(|chats| ExportChatsChunk { chats });
                let after = chunk
                    .as_ref()
                    .ok()
                    .and_then(|chunk| chunk.chats.last())
                    .map(|chat| ExportCursor { started_at_ms: chat.created_at_ms, id: chat.id.clone() });
                let last = chunk.as_ref().map_or(true, |chunk| chunk.chats.len() < EXPORT_CHUNK as usize);
                if sender.send(chunk.map_err(Status::from)).await.is_err() || last {
                    return;
                }
                page = store.export_chat_page(&team_id, &filter, after.as_ref()).await;
            }
        });
        reply(Ok(tokio_stream::wrappers::ReceiverStream::new(receiver)))
    }

    async fn get_chat(&self, request: Request<GetChatRequest>) -> Reply<Chat> {
        let request = request.into_inner();
        let limit = if request.messages_limit == 0 {
            u32::try_from(limits::CHAT_MESSAGES.default).unwrap_or(100)
        } else {
            request.messages_limit
        };
        validate([limits::CHAT_MESSAGES.check("messagesLimit", i64::from(limit))])?;
        reply(self.store.chat(&request.team_id, &request.chat_id, limit, request.messages_before.as_deref()).await)
    }

    async fn delete_chat(&self, request: Request<GetChatRequest>) -> Reply<Chat> {
        let request = request.into_inner();
        reply(self.store.delete_chat(&request.team_id, &request.chat_id).await)
    }

    async fn get_usage(&self, request: Request<UsageRequest>) -> Reply<UsageResponse> {
        let request = request.into_inner();
        let days = self.store.usage(&request.team_id, request.from_ms, request.to_ms).await?;
        reply(Ok(UsageResponse { days }))
    }
}
