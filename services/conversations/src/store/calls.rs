//! Calls: upserted by their runtime's `external_id`, given transcript segments (idempotent by
//! `seq`), timeline events, an end and a recording; read, listed, flagged and deleted by the
//! gateway. Every write that changes searchable text changes its search row in the same
//! transaction.
//!
//! What calls share with chats (finding, upserting, paging, deleting) is in `conversation`.
//! The functions here that look like those of `chats` are kept apart because they write
//! different things: a call's parts are segments keyed by `seq` with a timeline beside them,
//! a chat's are messages keyed by their external id with counters on the chat row; a call's
//! end carries an outcome, a cost and a webhook of its own, a chat's only a status.

use std::collections::{HashMap, HashSet};

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::limits::{self, Length};
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, validate};
use switchboard_proto::v1::{Call, CallAnalysis, CallEvent, PageInfo, Recording, TranscriptSegment};

use super::conversation::{self, Conversation, Order, external_id_violation, find, read_page};
use super::search::{self, Kind, Source};
use super::{
    Appended, CallCost, CallEnd, CallFilter, CallFlags, CallSort, ConversationStore, Key, NewCall, NewEvent,
    NewSegment, RecordingMeta, call_not_found, check_ids,
};
use switchboard_kit::listing::{self, Arg, Filter};

/// A phone number as the store keeps it: E.164 is at most 16 characters, checked by the
/// service; this bound only keeps anything else out.
pub(super) const NUMBER: Length = Length::new(1, 32);

pub(super) const CALL_COLUMNS: &str = "c.id, c.team_id, c.external_id, c.agent_id, c.from_number, c.to_number, c.direction, \
     c.status, c.started_at, c.ended_at, c.duration_seconds, c.summary, c.score, c.flagged, c.favorite, c.spam, \
     c.recording_object_key, c.recording_content_type, c.recording_size_bytes, c.updated_at, c.sentiment, \
     c.successful, c.analysis_custom, c.disconnection_reason, c.cost_credits, c.cost_unpaid_credits";

pub(super) fn call_from_row(row: &AnyRow) -> Result<Call, sqlx::Error> {
    let summary: Option<String> = row.try_get("summary")?;
    // A call has an analysis once one was reported: its sentiment is then set ("unknown" at
    // least).
    let analysis = match row.try_get::<Option<String>, _>("sentiment")? {
        Some(sentiment) => Some(CallAnalysis {
            summary: summary.clone(),
            sentiment,
            successful: row.try_get::<Option<i64>, _>("successful")?.map(|successful| successful != 0),
            custom_json: row.try_get::<Option<String>, _>("analysis_custom")?.unwrap_or_else(|| "{}".to_owned()),
        }),
        None => None,
    };
    let object_key: Option<String> = row.try_get("recording_object_key")?;
    let recording = match object_key {
        Some(object_key) => Some(Recording {
            content_type: row.try_get::<Option<String>, _>("recording_content_type")?.unwrap_or_default(),
            size_bytes: row.try_get::<Option<i64>, _>("recording_size_bytes")?.unwrap_or_default(),
            object_key,
            // Signed by the service on reads, when its object store can.
            playback_url: None,
        }),
        None => None,
    };
    Ok(Call {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        external_id: row.try_get("external_id")?,
        agent_id: row.try_get("agent_id")?,
        from: row.try_get("from_number")?,
        to: row.try_get("to_number")?,
        direction: row.try_get("direction")?,
        status: row.try_get("status")?,
        started_at_ms: row.try_get("started_at")?,
        ended_at_ms: row.try_get("ended_at")?,
        duration_seconds: row.try_get("duration_seconds")?,
        summary,
        score: row.try_get("score")?,
        flagged: row.try_get::<i64, _>("flagged")? != 0,
        favorite: row.try_get::<i64, _>("favorite")? != 0,
        spam: row.try_get::<i64, _>("spam")? != 0,
        transcript: Vec::new(),
        timeline: Vec::new(),
        recording,
        updated_at_ms: row.try_get("updated_at")?,
        analysis,
        disconnection_reason: row.try_get("disconnection_reason")?,
        cost_credits: row.try_get("cost_credits")?,
        cost_unpaid_credits: row.try_get("cost_unpaid_credits")?,
    })
}

/// Segments carry their offset; the absolute time follows the call's (current) start.
fn segment_from_row(row: &AnyRow, started_at_ms: i64) -> Result<TranscriptSegment, sqlx::Error> {
    let offset_ms: i64 = row.try_get("offset_ms")?;
    Ok(TranscriptSegment {
        seq: row.try_get("seq")?,
        speaker: row.try_get("speaker")?,
        text: row.try_get("text")?,
        offset_ms,
        timestamp_ms: started_at_ms.saturating_add(offset_ms),
    })
}

impl Conversation for Call {
    type New = NewCall;
    const TABLE: &'static str = "calls";
    const COLUMNS: &'static str = CALL_COLUMNS;
    const PARTS: &'static [&'static str] = &["call_segments", "call_events"];
    const PART_KEY: &'static str = "call_id";
    const SEARCH: Kind = Kind::Call;

    fn from_row(row: &AnyRow) -> Result<Self, sqlx::Error> {
        call_from_row(row)
    }

    fn not_found() -> ServiceError {
        call_not_found()
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn external_id(new: &NewCall) -> &str {
        &new.external_id
    }

    async fn insert(conn: &mut AnyConnection, team_id: &str, new: &NewCall) -> ServiceResult<Option<Call>> {
        insert_call(conn, team_id, new).await
    }

    async fn update(conn: &mut AnyConnection, current: Call, new: &NewCall) -> ServiceResult<Call> {
        update_call(conn, current, new).await
    }
}

/// Fills in the transcripts of `calls` (seq order) with one query.
async fn with_transcripts(conn: &mut AnyConnection, mut calls: Vec<Call>) -> ServiceResult<Vec<Call>> {
    if calls.is_empty() {
        return Ok(calls);
    }
    let placeholders: Vec<String> = (1..=calls.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "SELECT call_id, seq, speaker, text, offset_ms FROM call_segments WHERE call_id IN ({}) ORDER BY call_id, seq",
        placeholders.join(", ")
    );
    let mut query = sqlx::query(&sql);
    for call in &calls {
        query = query.bind(call.id.as_str());
    }
    let rows = query.fetch_all(conn).await?;
    let started: HashMap<&str, i64> = calls.iter().map(|call| (call.id.as_str(), call.started_at_ms)).collect();
    let mut transcripts: HashMap<String, Vec<TranscriptSegment>> = HashMap::new();
    for row in &rows {
        let call_id: String = row.try_get("call_id")?;
        let started_at_ms = started.get(call_id.as_str()).copied().unwrap_or_default();
        transcripts.entry(call_id).or_default().push(segment_from_row(row, started_at_ms)?);
    }
    for call in &mut calls {
        call.transcript = transcripts.remove(&call.id).unwrap_or_default();
    }
    Ok(calls)
}

async fn with_transcript(conn: &mut AnyConnection, call: Call) -> ServiceResult<Call> {
    let mut calls = with_transcripts(conn, vec![call]).await?;
    calls.pop().ok_or_else(|| ServiceError::internal(anyhow::anyhow!("a call went missing while reading it")))
}

/// The timeline in time order, events of the same time in order of arrival.
async fn with_timeline(conn: &mut AnyConnection, mut call: Call) -> ServiceResult<Call> {
    let rows =
        sqlx::query("SELECT type, occurred_at, data FROM call_events WHERE call_id = $1 ORDER BY occurred_at, id")
            .bind(call.id.as_str())
            .fetch_all(conn)
            .await?;
    call.timeline = rows
        .iter()
        .map(|row| {
            Ok(CallEvent {
                r#type: row.try_get("type")?,
                at_ms: row.try_get("occurred_at")?,
                data: row.try_get("data")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()?;
    Ok(call)
}

/// Everything about a call, as `GetCall` shows it.
async fn full_call(conn: &mut AnyConnection, call: Call) -> ServiceResult<Call> {
    let call = with_transcript(conn, call).await?;
    with_timeline(conn, call).await
}

/// Whole seconds from start to end, rounded down.
fn duration_seconds(started_at_ms: i64, ended_at_ms: Option<i64>) -> Option<i64> {
    ended_at_ms.map(|ended| ended.saturating_sub(started_at_ms).div_euclid(1000))
}

fn validate_new_call(new: &NewCall) -> ServiceResult<()> {
    validate([
        external_id_violation("externalId", &new.external_id),
        new.agent_id
            .as_deref()
            .filter(|id| uuid::Uuid::parse_str(id).is_err())
            .map(|_| FieldViolation::new("agentId", "must be a UUID")),
        NUMBER.check("from", &new.from),
        NUMBER.check("to", &new.to),
        limits::CALL_STATUS.check("status", &new.status),
    ])
}

fn validate_segments(external_id: &str, segments: &[NewSegment]) -> ServiceResult<()> {
    let count = i64::try_from(segments.len()).unwrap_or(i64::MAX);
    let mut violations =
        vec![external_id_violation("externalId", external_id), limits::APPEND_BATCH.check("segments", count)];
    for (index, segment) in segments.iter().enumerate() {
        violations.push(limits::UTTERANCE.check(&format!("segments[{index}].text"), &segment.text));
        violations.push(
            (segment.seq < 0).then(|| FieldViolation::new(format!("segments[{index}].seq"), "must not be negative")),
        );
        violations.push(
            (segment.offset_ms < 0)
                .then(|| FieldViolation::new(format!("segments[{index}].offsetMs"), "must not be negative")),
        );
    }
    validate(violations)
}

/// The event's data as stored: a JSON object, compact.
fn event_data(event: &NewEvent) -> ServiceResult<String> {
    let not_an_object = || ServiceError::invalid_field("data", "must be a JSON object");
    match serde_json::from_str::<serde_json::Value>(&event.data) {
        Ok(object @ serde_json::Value::Object(_)) => Ok(object.to_string()),
        _ => Err(not_an_object()),
    }
}

/// What [`ConversationStore::end_call`] refuses of an end, before anything is read.
pub fn check_end(external_id: &str, end: &CallEnd) -> ServiceResult<()> {
    validate([
        external_id_violation("externalId", external_id),
        limits::CALL_STATUS.check("status", &end.status),
        end.summary.as_deref().and_then(|summary| limits::SUMMARY.check("summary", summary)),
        end.score.filter(|score| !score.is_finite()).map(|_| FieldViolation::new("score", "must be a number")),
        end.analysis.as_ref().and_then(|analysis| limits::EVENT_DATA.check("analysis.custom", &analysis.custom)),
        end.cost
            .as_ref()
            .filter(|cost| cost.credits < 0 || !(0..=cost.credits).contains(&cost.unpaid))
            .map(|_| FieldViolation::new("costCredits", "must be 0 or more")),
    ])
}

pub(super) fn validate_filter(filter: &CallFilter) -> ServiceResult<()> {
    let duration = |field: &str, value: Option<i64>| value.and_then(|value| limits::DURATION.check(field, value));
    let inverted = matches!((filter.min_duration, filter.max_duration), (Some(min), Some(max)) if min > max);
    validate([
        limits::PAGE.check("page", i64::from(filter.page)),
        limits::PAGE_LIMIT.check("limit", i64::from(filter.limit)),
        filter.search.as_deref().and_then(|search| limits::CONVERSATION_SEARCH.check("search", search)),
        filter
            .agent_id
            .as_deref()
            .filter(|id| uuid::Uuid::parse_str(id).is_err())
            .map(|_| FieldViolation::new("agentId", "must be a UUID")),
        duration("minDuration", filter.min_duration),
        duration("maxDuration", filter.max_duration),
        inverted.then(|| FieldViolation::new("minDuration", "must not be greater than maxDuration")),
    ])
}

/// Keeps the first segment of each seq: a request that repeats a seq appends it once.
fn first_of_each_seq(segments: Vec<NewSegment>) -> Vec<NewSegment> {
    let mut seen = HashSet::with_capacity(segments.len());
    segments.into_iter().filter(|segment| seen.insert(segment.seq)).collect()
}

/// Inserts the segments in one statement; those whose seq the call has already are left as
/// they are. Returns the seqs that were new.
async fn insert_segments(
    conn: &mut AnyConnection,
    call: &Call,
    segments: &[NewSegment],
    now: i64,
) -> ServiceResult<HashSet<i64>> {
    // $1..$3 are shared by every row; each row adds four values.
    let rows: Vec<String> = (0..segments.len())
        .map(|i| {
            let first = 4 + 4 * i;
            format!("($1, $2, ${first}, ${}, ${}, ${}, $3)", first + 1, first + 2, first + 3)
        })
        .collect();
    let sql = format!(
        "INSERT INTO call_segments (call_id, team_id, seq, speaker, text, offset_ms, created_at) VALUES {} \
         ON CONFLICT (call_id, seq) DO NOTHING RETURNING seq",
        rows.join(", ")
    );
    let mut query = sqlx::query(&sql).bind(call.id.as_str()).bind(call.team_id.as_str()).bind(now);
    for segment in segments {
        query =
            query.bind(segment.seq).bind(segment.speaker.as_str()).bind(segment.text.as_str()).bind(segment.offset_ms);
    }
    let inserted = query.fetch_all(conn).await?;
    inserted.iter().map(|row| row.try_get::<i64, _>("seq")).collect::<Result<_, _>>().map_err(Into::into)
}

async fn touch(conn: &mut AnyConnection, call_id: &str, now: i64) -> ServiceResult<()> {
    sqlx::query("UPDATE calls SET updated_at = $1 WHERE id = $2").bind(now).bind(call_id).execute(conn).await?;
    Ok(())
}

/// The numbers and summary that search finds a call by.
async fn index_meta(conn: &mut AnyConnection, call: &Call) -> ServiceResult<()> {
    let texts = [call.from.as_str(), call.to.as_str(), call.summary.as_deref().unwrap_or_default()];
    search::replace(conn, Kind::Call, (&call.id, &call.team_id), Source::Meta, texts).await
}

/// Writes the call's analysis and disconnection reason, and a new cost with its ledger entry.
async fn write_outcome(conn: &mut AnyConnection, call: &Call, cost: Option<&CallCost>) -> ServiceResult<()> {
    let analysis = call.analysis.as_ref();
    sqlx::query(
        "UPDATE calls SET sentiment = $1, successful = $2, analysis_custom = $3, disconnection_reason = $4 \
         WHERE id = $5",
    )
    .bind(analysis.map(|analysis| analysis.sentiment.as_str()))
    .bind(analysis.and_then(|analysis| analysis.successful).map(switchboard_kit::db::flag))
    .bind(analysis.map(|analysis| analysis.custom_json.as_str()))
    .bind(call.disconnection_reason.as_deref())
    .bind(call.id.as_str())
    .execute(&mut *conn)
    .await?;
    if let Some(cost) = cost {
        sqlx::query("UPDATE calls SET cost_credits = $1, cost_unpaid_credits = $2, credit_entry_id = $3 WHERE id = $4")
            .bind(cost.credits)
            .bind(cost.unpaid)
            .bind(cost.credit_entry_id.as_deref())
            .bind(call.id.as_str())
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// Inserts a new call; `None` when a concurrent upsert inserted it first.
async fn insert_call(conn: &mut AnyConnection, team_id: &str, new: &NewCall) -> ServiceResult<Option<Call>> {
    let id = uuid::Uuid::now_v7().to_string();
    let now = now_ms();
    let (signature, empty) = search::empty_signature(conn);
    let sql = format!(
        "INSERT INTO calls (id, team_id, external_id, agent_id, from_number, to_number, direction, status, \
         started_at, flagged, favorite, spam, created_at, updated_at{signature}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, 0, 0, $10, $10{empty}) \
         ON CONFLICT (team_id, external_id) DO NOTHING RETURNING id"
    );
    let inserted = sqlx::query(&sql)
        .bind(&id)
        .bind(team_id)
        .bind(new.external_id.as_str())
        .bind(new.agent_id.as_deref())
        .bind(new.from.as_str())
        .bind(new.to.as_str())
        .bind(new.direction.as_str())
        .bind(new.status.as_str())
        .bind(new.started_at_ms)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
    if inserted.is_none() {
        return Ok(None);
    }
    let call = Call {
        id,
        team_id: team_id.to_owned(),
        external_id: new.external_id.clone(),
        agent_id: new.agent_id.clone(),
        from: new.from.clone(),
        to: new.to.clone(),
        direction: new.direction.as_str().to_owned(),
        status: new.status.clone(),
        started_at_ms: new.started_at_ms,
        updated_at_ms: now,
        ..Call::default()
    };
    index_meta(conn, &call).await?;
    Ok(Some(call))
}

/// Applies what differs between the stored call and the runtime's report; writes nothing
/// when nothing does. An absent agent keeps the stored one. An ended call keeps the status
/// its end gave it: a late or retried report of the call in progress must not reopen it.
async fn update_call(conn: &mut AnyConnection, current: Call, new: &NewCall) -> ServiceResult<Call> {
    let mut call = current.clone();
    call.agent_id = new.agent_id.clone().or(current.agent_id.clone());
    call.from.clone_from(&new.from);
    call.to.clone_from(&new.to);
    call.direction = new.direction.as_str().to_owned();
    if current.ended_at_ms.is_none() {
        call.status.clone_from(&new.status);
    }
    call.started_at_ms = new.started_at_ms;
    if call == current {
        return Ok(current);
    }
    if current.ended_at_ms.is_some_and(|ended| ended < call.started_at_ms) {
        return Err(ServiceError::invalid_field("startedAt", "must not be after the call's end"));
    }
    call.duration_seconds = duration_seconds(call.started_at_ms, call.ended_at_ms);
    call.updated_at_ms = now_ms();
    sqlx::query(
        "UPDATE calls SET agent_id = $1, from_number = $2, to_number = $3, direction = $4, status = $5, \
         started_at = $6, duration_seconds = $7, updated_at = $8 WHERE id = $9",
    )
    .bind(call.agent_id.as_deref())
    .bind(call.from.as_str())
    .bind(call.to.as_str())
    .bind(call.direction.as_str())
    .bind(call.status.as_str())
    .bind(call.started_at_ms)
    .bind(call.duration_seconds)
    .bind(call.updated_at_ms)
    .bind(call.id.as_str())
    .execute(&mut *conn)
    .await?;
    if (&call.from, &call.to) != (&current.from, &current.to) {
        index_meta(conn, &call).await?;
    }
    Ok(call)
}

impl ConversationStore {
    /// Creates the call, or updates it when the team has one with this `external_id`: the
    /// same report twice writes nothing the second time. Two concurrent first reports of a
    /// call make one call: the insert that loses the unique (team, external_id) race finds
    /// the winner's row and updates it. Returns the call with its transcript.
    pub async fn upsert_call(&self, team_id: &str, new: NewCall) -> ServiceResult<Call> {
        check_ids(&[("teamId", team_id)])?;
        validate_new_call(&new)?;
        let lock = self.db.for_update();
        let mut tx = self.db.begin_write().await?;
        let call = conversation::upsert::<Call>(&mut tx, team_id, &new, lock).await?;
        let call = with_transcript(&mut tx, call).await?;
        tx.commit().await?;
        Ok(call)
    }

    /// Adds transcript segments, all or none. A seq the call has already is left as it is
    /// (so a retried request appends nothing), and a seq repeated within the request counts
    /// once. The new segments' text is searchable once this returns.
    pub async fn append_transcript(
        &self,
        team_id: &str,
        external_id: &str,
        segments: Vec<NewSegment>,
    ) -> ServiceResult<Appended> {
        check_ids(&[("teamId", team_id)])?;
        validate_segments(external_id, &segments)?;
        let segments = first_of_each_seq(segments);
        let mut tx = self.db.begin_write().await?;
        let call = find::<Call>(&mut tx, team_id, Key::External(external_id), self.db.for_update()).await?;
        let now = now_ms();
        let inserted = insert_segments(&mut tx, &call, &segments, now).await?;
        if !inserted.is_empty() {
            let texts = segments.iter().filter(|s| inserted.contains(&s.seq)).map(|s| s.text.as_str());
            search::add(&mut tx, Kind::Call, (&call.id, &call.team_id), Source::Transcript, texts).await?;
            touch(&mut tx, &call.id, now).await?;
        }
        let total: i64 = sqlx::query("SELECT COUNT(*) AS n FROM call_segments WHERE call_id = $1")
            .bind(call.id.as_str())
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        tx.commit().await?;
        Ok(Appended {
            appended: u32::try_from(inserted.len()).unwrap_or(u32::MAX),
            total: u32::try_from(total).unwrap_or(u32::MAX),
        })
    }

    /// Adds an event to the call's timeline. `data` must be a JSON object; it is kept
    /// compact. An event the call has already (same type, time and data) is not added
    /// twice, so that a retried request changes nothing.
    pub async fn add_call_event(&self, team_id: &str, external_id: &str, event: NewEvent) -> ServiceResult<CallEvent> {
        check_ids(&[("teamId", team_id)])?;
        validate([
            external_id_violation("externalId", external_id),
            limits::EVENT_TYPE.check("type", &event.kind),
            limits::EVENT_DATA.check("data", &event.data),
        ])?;
        let data = event_data(&event)?;
        let mut tx = self.db.begin_write().await?;
        let call = find::<Call>(&mut tx, team_id, Key::External(external_id), self.db.for_update()).await?;
        let known = sqlx::query(
            "SELECT id FROM call_events WHERE call_id = $1 AND occurred_at = $2 AND type = $3 AND data = $4",
        )
        .bind(call.id.as_str())
        .bind(event.at_ms)
        .bind(event.kind.as_str())
        .bind(data.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        if known.is_none() {
            let now = now_ms();
            sqlx::query(
                "INSERT INTO call_events (call_id, team_id, type, occurred_at, data, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(call.id.as_str())
            .bind(team_id)
            .bind(event.kind.as_str())
            .bind(event.at_ms)
            .bind(data.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
            touch(&mut tx, &call.id, now).await?;
        }
        tx.commit().await?;
        Ok(CallEvent { r#type: event.kind, at_ms: event.at_ms, data })
    }

    /// Ends the call: its end time, status, duration (whole seconds, rounded down) and,
    /// when given, summary, score, analysis and disconnection reason (absent ones keep what the
    /// call has), and its cost, which is written once (a different one is refused). Ending
    /// again with the same values writes nothing.
    pub async fn end_call(&self, team_id: &str, external_id: &str, end: CallEnd) -> ServiceResult<Call> {
        check_ids(&[("teamId", team_id)])?;
        check_end(external_id, &end)?;
        let mut tx = self.db.begin_write().await?;
        let current = find::<Call>(&mut tx, team_id, Key::External(external_id), self.db.for_update()).await?;
        if end.ended_at_ms < current.started_at_ms {
            return Err(ServiceError::invalid_field("endedAt", "must not be before the call's start"));
        }
        if let (Some(recorded), Some(cost)) = (current.cost_credits, &end.cost)
            && recorded != cost.credits
        {
            let message = format!("the call's cost is recorded already, as {recorded}, and cannot change");
            return Err(ServiceError::invalid_field("costCredits", message));
        }
        let mut call = current.clone();
        call.ended_at_ms = Some(end.ended_at_ms);
        call.duration_seconds = duration_seconds(call.started_at_ms, call.ended_at_ms);
        call.status = end.status;
        call.summary = end.summary.or(current.summary.clone());
        call.score = end.score.or(current.score);
        if let Some(analysis) = &end.analysis {
            call.analysis = Some(CallAnalysis {
                summary: None,
                sentiment: analysis.sentiment.as_str().to_owned(),
                successful: analysis.successful,
                custom_json: analysis.custom.clone(),
            });
        }
        if let Some(analysis) = call.analysis.as_mut() {
            analysis.summary.clone_from(&call.summary);
        }
        if let Some(reason) = end.disconnection_reason {
            call.disconnection_reason = Some(reason.as_str().to_owned());
        }
        // A cost is written once, with the ledger entry that paid it.
        let new_cost = end.cost.filter(|_| current.cost_credits.is_none());
        if let Some(cost) = &new_cost {
            call.cost_credits = Some(cost.credits);
            call.cost_unpaid_credits = Some(cost.unpaid);
        }
        if call != current {
            call.updated_at_ms = now_ms();
            // The score goes as a number and a flag, never as a NULL of type f64: sqlx's Any
            // driver (0.8) sends such a NULL to PostgreSQL as float4, and the statement cached
            // with that type then refuses a later float8 ("incorrect binary data format").
            sqlx::query(
                "UPDATE calls SET ended_at = $1, duration_seconds = $2, status = $3, summary = $4, \
                 score = CASE WHEN $5 THEN $6 ELSE NULL END, updated_at = $7 WHERE id = $8",
            )
            .bind(call.ended_at_ms)
            .bind(call.duration_seconds)
            .bind(call.status.as_str())
            .bind(call.summary.as_deref())
            .bind(call.score.is_some())
            .bind(call.score.unwrap_or_default())
            .bind(call.updated_at_ms)
            .bind(call.id.as_str())
            .execute(&mut *tx)
            .await?;
            write_outcome(&mut tx, &call, new_cost.as_ref()).await?;
            if call.summary != current.summary {
                index_meta(&mut tx, &call).await?;
            }
        }
        let call = with_transcript(&mut tx, call).await?;
        if current.ended_at_ms.is_none() {
            // Webhooks hear of the end once; ending again (a runtime's retry) tells nobody.
            let resource = switchboard_proto::v1::event::Resource::Call(call.clone());
            switchboard_kit::outbox::record(&mut tx, EventType::CallEnded, (team_id, &call.id), resource).await?;
        }
        tx.commit().await?;
        Ok(call)
    }

    /// Records where the call's recording is kept. Returns the recording it replaces, whose
    /// object the caller deletes; `None` when there was none or it had the same object key
    /// (the object was overwritten, not replaced).
    pub async fn set_recording(
        &self,
        team_id: &str,
        external_id: &str,
        recording: RecordingMeta,
    ) -> ServiceResult<Option<RecordingMeta>> {
        check_ids(&[("teamId", team_id)])?;
        validate([
            external_id_violation("externalId", external_id),
            (recording.size_bytes < 0).then(|| FieldViolation::new("sizeBytes", "must not be negative")),
        ])?;
        let mut tx = self.db.begin_write().await?;
        let call = find::<Call>(&mut tx, team_id, Key::External(external_id), self.db.for_update()).await?;
        let previous = call.recording.map(|r| RecordingMeta {
            object_key: r.object_key,
            content_type: r.content_type,
            size_bytes: r.size_bytes,
        });
        if previous.as_ref() != Some(&recording) {
            sqlx::query(
                "UPDATE calls SET recording_object_key = $1, recording_content_type = $2, recording_size_bytes = $3, \
                 updated_at = $4 WHERE id = $5",
            )
            .bind(recording.object_key.as_str())
            .bind(recording.content_type.as_str())
            .bind(recording.size_bytes)
            .bind(now_ms())
            .bind(call.id.as_str())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(previous.filter(|previous| previous.object_key != recording.object_key))
    }

    /// The call with its transcript and timeline.
    pub async fn call(&self, team_id: &str, call_id: &str) -> ServiceResult<Call> {
        check_ids(&[("teamId", team_id), ("callId", call_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        let call = find::<Call>(&mut conn, team_id, Key::Id(call_id), "").await?;
        full_call(&mut conn, call).await
    }

    /// The call named by its runtime's id, without transcript or timeline: what an end needs
    /// to know (its id, agent and cost) before it is written.
    pub async fn call_head(&self, team_id: &str, external_id: &str) -> ServiceResult<Call> {
        self.by_external_id::<Call>(team_id, external_id).await
    }

    /// The call named by its runtime's id, with its transcript and timeline.
    pub async fn call_by_external_id(&self, team_id: &str, external_id: &str) -> ServiceResult<Call> {
        let call = self.by_external_id::<Call>(team_id, external_id).await?;
        let mut conn = self.db.pool().acquire().await?;
        full_call(&mut conn, call).await
    }

    /// A page of the team's calls, each with its transcript (read for the whole page in one
    /// query) but not its timeline. Every bound is inclusive; a call in progress has no
    /// duration and matches no duration filter. Ties of the sort key go by id in the same
    /// direction and calls without the key (not ended yet) come last either way, so paging
    /// neither loses nor repeats a call.
    pub async fn list_calls(&self, team_id: &str, filter: &CallFilter) -> ServiceResult<(Vec<Call>, PageInfo)> {
        check_ids(&[("teamId", team_id)])?;
        validate_filter(filter)?;

        let (key, nullable) = match filter.sort {
            CallSort::CreatedAt => ("c.started_at", false),
            CallSort::Duration => ("c.duration_seconds", true),
            CallSort::EndedAt => ("c.ended_at", true),
        };
        let order = Order { key, nullable, ascending: filter.ascending };
        let mut conn = self.db.pool().acquire().await?;
        let conditions = self.call_conditions(&mut conn, team_id, filter).await?;
        let (calls, info) = read_page::<Call>(&mut conn, order, &conditions, (filter.page, filter.limit)).await?;
        Ok((with_transcripts(&mut conn, calls).await?, info))
    }

    /// The list's conditions; a search reads the text index on `conn` (see [`Filter::search`]).
    pub(super) async fn call_conditions(
        &self,
        conn: &mut AnyConnection,
        team_id: &str,
        filter: &CallFilter,
    ) -> ServiceResult<Filter> {
        let engine = self.db.engine();
        let mut conditions = Filter::for_team(engine, "c", team_id, filter.search.is_some());
        let text = |value: &str| Some(Arg::Text(value.to_owned()));
        if let Some(number) = &filter.number {
            let number = conditions.arg(Arg::Text(number.clone()));
            conditions.and(format!("(c.from_number = {number} OR c.to_number = {number})"));
        }
        conditions.compare_each([
            ("c.direction =", filter.direction.and_then(|direction| text(direction.as_str()))),
            ("c.agent_id =", filter.agent_id.as_deref().and_then(text)),
            ("c.sentiment =", filter.sentiment.and_then(|sentiment| text(sentiment.as_str()))),
            ("c.successful =", filter.successful.map(|successful| Arg::Int(switchboard_kit::db::flag(successful)))),
            ("c.disconnection_reason =", filter.disconnection_reason.and_then(|reason| text(reason.as_str()))),
            ("c.duration_seconds >=", filter.min_duration.map(Arg::Int)),
            ("c.duration_seconds <=", filter.max_duration.map(Arg::Int)),
            ("c.started_at >=", filter.created_from_ms.map(Arg::Int)),
            ("c.started_at <=", filter.created_to_ms.map(Arg::Int)),
        ]);
        if let Some(query) = filter.search.as_deref().map(listing::normalise_query) {
            conditions.search(conn, engine, (Kind::Call.index(), "c"), &query).await?;
        }
        Ok(conditions)
    }

    /// Sets the flags that are given; the others keep their value. Returns the call with its
    /// transcript.
    pub async fn update_call_flags(&self, team_id: &str, call_id: &str, flags: CallFlags) -> ServiceResult<Call> {
        check_ids(&[("teamId", team_id), ("callId", call_id)])?;
        let mut tx = self.db.begin_write().await?;
        let current = find::<Call>(&mut tx, team_id, Key::Id(call_id), self.db.for_update()).await?;
        let mut call = current.clone();
        call.flagged = flags.flagged.unwrap_or(current.flagged);
        call.favorite = flags.favorite.unwrap_or(current.favorite);
        call.spam = flags.spam.unwrap_or(current.spam);
        if call != current {
            call.updated_at_ms = now_ms();
            sqlx::query("UPDATE calls SET flagged = $1, favorite = $2, spam = $3, updated_at = $4 WHERE id = $5")
                .bind(i64::from(call.flagged))
                .bind(i64::from(call.favorite))
                .bind(i64::from(call.spam))
                .bind(call.updated_at_ms)
                .bind(call.id.as_str())
                .execute(&mut *tx)
                .await?;
        }
        let call = with_transcript(&mut tx, call).await?;
        tx.commit().await?;
        Ok(call)
    }

    /// Deletes the call with its transcript, timeline and search rows, all at once. Returns
    /// the call as it was, recording included: its object is the caller's to delete.
    pub async fn delete_call(&self, team_id: &str, call_id: &str) -> ServiceResult<Call> {
        check_ids(&[("teamId", team_id), ("callId", call_id)])?;
        let mut tx = self.db.begin_write().await?;
        let call = find::<Call>(&mut tx, team_id, Key::Id(call_id), self.db.for_update()).await?;
        let call = full_call(&mut tx, call).await?;
        conversation::delete(&mut tx, team_id, &call).await?;
        tx.commit().await?;
        Ok(call)
    }
}
