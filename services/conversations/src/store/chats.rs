//! Chats: upserted by their runtime's `external_id`, given messages (idempotent by the
//! message's `external_id`), ended; read with their messages a page at a time, listed and
//! deleted by the gateway. The chat row keeps `message_count` and `last_message_at` so that
//! lists need not count messages.

use std::collections::HashSet;

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};
use switchboard_kit::limits;
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, validate};
use switchboard_proto::v1::{Chat, ChatMessage, PageInfo};

use super::calls::NUMBER;
use super::conversation::{self, Conversation, Order, external_id_violation, find, read_page};
use super::search::{self, Kind, Source};
use super::{
    Appended, ChatEnd, ChatFilter, ChatSort, ChatStatus, ConversationStore, Key, NewChat, NewMessage, chat_not_found,
    check_ids,
};
use switchboard_kit::listing::{self, Arg, Filter};

pub(super) const CHAT_COLUMNS: &str = "c.id, c.team_id, c.external_id, c.agent_id, c.channel, c.status, c.contact_number, \
     c.contact_email, c.message_count, c.last_message_at, c.created_at, c.ended_at, c.summary, c.updated_at";

pub(super) fn chat_from_row(row: &AnyRow) -> Result<Chat, sqlx::Error> {
    Ok(Chat {
        id: row.try_get("id")?,
        team_id: row.try_get("team_id")?,
        external_id: row.try_get("external_id")?,
        agent_id: row.try_get("agent_id")?,
        channel: row.try_get("channel")?,
        status: row.try_get("status")?,
        contact_number: row.try_get("contact_number")?,
        contact_email: row.try_get("contact_email")?,
        message_count: u32::try_from(row.try_get::<i64, _>("message_count")?).unwrap_or(u32::MAX),
        last_message_at_ms: row.try_get("last_message_at")?,
        created_at_ms: row.try_get("created_at")?,
        ended_at_ms: row.try_get("ended_at")?,
        summary: row.try_get("summary")?,
        messages: Vec::new(),
        updated_at_ms: row.try_get("updated_at")?,
    })
}

fn message_from_row(row: &AnyRow) -> Result<ChatMessage, sqlx::Error> {
    Ok(ChatMessage {
        id: row.try_get("id")?,
        external_id: row.try_get("external_id")?,
        role: row.try_get("role")?,
        text: row.try_get("text")?,
        created_at_ms: row.try_get("created_at")?,
    })
}

impl Conversation for Chat {
    type New = NewChat;
    const TABLE: &'static str = "chats";
    const COLUMNS: &'static str = CHAT_COLUMNS;
    const PARTS: &'static [&'static str] = &["chat_messages"];
    const PART_KEY: &'static str = "chat_id";
    const SEARCH: Kind = Kind::Chat;

    fn from_row(row: &AnyRow) -> Result<Self, sqlx::Error> {
        chat_from_row(row)
    }

    fn not_found() -> ServiceError {
        chat_not_found()
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn external_id(new: &NewChat) -> &str {
        &new.external_id
    }

    async fn insert(conn: &mut AnyConnection, team_id: &str, new: &NewChat) -> ServiceResult<Option<Chat>> {
        insert_chat(conn, team_id, new).await
    }

    async fn update(conn: &mut AnyConnection, current: Chat, new: &NewChat) -> ServiceResult<Chat> {
        update_chat(conn, current, new).await
    }
}

fn uuid_violation(field: &str, id: Option<&str>) -> Option<FieldViolation> {
    id.filter(|id| uuid::Uuid::parse_str(id).is_err()).map(|_| FieldViolation::new(field, "must be a UUID"))
}

fn validate_new_chat(new: &NewChat) -> ServiceResult<()> {
    validate([
        external_id_violation("externalId", &new.external_id),
        uuid_violation("agentId", new.agent_id.as_deref()),
        new.contact_number.as_deref().and_then(|number| NUMBER.check("contactNumber", number)),
        new.contact_email.as_deref().and_then(|email| limits::EMAIL.check("contactEmail", email)),
    ])
}

fn validate_messages(external_id: &str, messages: &[NewMessage]) -> ServiceResult<()> {
    let count = i64::try_from(messages.len()).unwrap_or(i64::MAX);
    let mut violations =
        vec![external_id_violation("externalId", external_id), limits::APPEND_BATCH.check("messages", count)];
    for (index, message) in messages.iter().enumerate() {
        violations.push(external_id_violation(&format!("messages[{index}].externalId"), &message.external_id));
        violations.push(limits::UTTERANCE.check(&format!("messages[{index}].text"), &message.text));
    }
    validate(violations)
}

pub(super) fn validate_filter(filter: &ChatFilter) -> ServiceResult<()> {
    validate([
        limits::PAGE.check("page", i64::from(filter.page)),
        limits::PAGE_LIMIT.check("limit", i64::from(filter.limit)),
        filter.search.as_deref().and_then(|search| limits::CONVERSATION_SEARCH.check("search", search)),
        uuid_violation("agentId", filter.agent_id.as_deref()),
    ])
}

/// Keeps the first message of each external id: a request that repeats one appends it once.
fn first_of_each_id(messages: Vec<NewMessage>) -> Vec<NewMessage> {
    let mut seen = HashSet::with_capacity(messages.len());
    messages.into_iter().filter(|message| seen.insert(message.external_id.clone())).collect()
}

/// Inserts the messages in one statement; those whose external id the chat has already are
/// left as they are. Returns the external ids that were new.
async fn insert_messages(
    conn: &mut AnyConnection,
    chat: &Chat,
    messages: &[NewMessage],
) -> ServiceResult<HashSet<String>> {
    // $1 and $2 are shared by every row; each row adds five values.
    let rows: Vec<String> = (0..messages.len())
        .map(|i| {
            let first = 3 + 5 * i;
            format!("(${first}, $1, $2, ${}, ${}, ${}, ${})", first + 1, first + 2, first + 3, first + 4)
        })
        .collect();
    let sql = format!(
        "INSERT INTO chat_messages (id, chat_id, team_id, external_id, role, text, created_at) VALUES {} \
         ON CONFLICT (chat_id, external_id) DO NOTHING RETURNING external_id",
        rows.join(", ")
    );
    let mut query = sqlx::query(&sql).bind(chat.id.as_str()).bind(chat.team_id.as_str());
    for message in messages {
        query = query
            .bind(uuid::Uuid::now_v7().to_string())
            .bind(message.external_id.as_str())
            .bind(message.role.as_str())
            .bind(message.text.as_str())
            .bind(message.created_at_ms);
    }
    let inserted = query.fetch_all(conn).await?;
    inserted.iter().map(|row| row.try_get::<String, _>("external_id")).collect::<Result<_, _>>().map_err(Into::into)
}

/// The contact number and e-mail that search finds a chat by.
async fn index_contact(conn: &mut AnyConnection, chat: &Chat) -> ServiceResult<()> {
    let texts = [chat.contact_number.as_deref().unwrap_or_default(), chat.contact_email.as_deref().unwrap_or_default()];
    search::replace(conn, Kind::Chat, (&chat.id, &chat.team_id), Source::Contact, texts).await
}

/// Inserts a new chat; `None` when a concurrent upsert inserted it first.
async fn insert_chat(conn: &mut AnyConnection, team_id: &str, new: &NewChat) -> ServiceResult<Option<Chat>> {
    let id = uuid::Uuid::now_v7().to_string();
    let now = now_ms();
    let (signature, empty) = search::empty_signature(conn);
    let sql = format!(
        "INSERT INTO chats (id, team_id, external_id, agent_id, channel, status, contact_number, contact_email, \
         message_count, created_at, updated_at{signature}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $10{empty}) \
         ON CONFLICT (team_id, external_id) DO NOTHING RETURNING id"
    );
    let inserted = sqlx::query(&sql)
        .bind(&id)
        .bind(team_id)
        .bind(new.external_id.as_str())
        .bind(new.agent_id.as_deref())
        .bind(new.channel.as_str())
        .bind(ChatStatus::Active.as_str())
        .bind(new.contact_number.as_deref())
        .bind(new.contact_email.as_deref())
        .bind(new.started_at_ms)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
    if inserted.is_none() {
        return Ok(None);
    }
    let chat = Chat {
        id,
        team_id: team_id.to_owned(),
        external_id: new.external_id.clone(),
        agent_id: new.agent_id.clone(),
        channel: new.channel.as_str().to_owned(),
        status: ChatStatus::Active.as_str().to_owned(),
        contact_number: new.contact_number.clone(),
        contact_email: new.contact_email.clone(),
        created_at_ms: new.started_at_ms,
        updated_at_ms: now,
        ..Chat::default()
    };
    index_contact(conn, &chat).await?;
    Ok(Some(chat))
}

/// Applies what differs between the stored chat and the runtime's report; writes nothing
/// when nothing does. Absent agent, number and e-mail keep the stored ones.
async fn update_chat(conn: &mut AnyConnection, current: Chat, new: &NewChat) -> ServiceResult<Chat> {
    let mut chat = current.clone();
    chat.agent_id = new.agent_id.clone().or(current.agent_id.clone());
    chat.channel = new.channel.as_str().to_owned();
    chat.contact_number = new.contact_number.clone().or(current.contact_number.clone());
    chat.contact_email = new.contact_email.clone().or(current.contact_email.clone());
    chat.created_at_ms = new.started_at_ms;
    if chat == current {
        return Ok(current);
    }
    if current.ended_at_ms.is_some_and(|ended| ended < chat.created_at_ms) {
        return Err(ServiceError::invalid_field("startedAt", "must not be after the chat's end"));
    }
    chat.updated_at_ms = now_ms();
    sqlx::query(
        "UPDATE chats SET agent_id = $1, channel = $2, contact_number = $3, contact_email = $4, created_at = $5, \
         updated_at = $6 WHERE id = $7",
    )
    .bind(chat.agent_id.as_deref())
    .bind(chat.channel.as_str())
    .bind(chat.contact_number.as_deref())
    .bind(chat.contact_email.as_deref())
    .bind(chat.created_at_ms)
    .bind(chat.updated_at_ms)
    .bind(chat.id.as_str())
    .execute(&mut *conn)
    .await?;
    if (&chat.contact_number, &chat.contact_email) != (&current.contact_number, &current.contact_email) {
        index_contact(conn, &chat).await?;
    }
    Ok(chat)
}

/// The newest `limit` messages before `before` (created_at, id), oldest first.
async fn messages_page(
    conn: &mut AnyConnection,
    chat_id: &str,
    limit: u32,
    before: Option<(i64, String)>,
) -> ServiceResult<Vec<ChatMessage>> {
    let columns = "id, external_id, role, text, created_at";
    let rows = match before {
        Some((created_at, id)) => {
            sqlx::query(&format!(
                "SELECT {columns} FROM chat_messages WHERE chat_id = $1 AND (created_at < $2 OR \
                 (created_at = $2 AND id < $3)) ORDER BY created_at DESC, id DESC LIMIT $4"
            ))
            .bind(chat_id)
            .bind(created_at)
            .bind(id)
            .bind(i64::from(limit))
            .fetch_all(conn)
            .await?
        }
        None => {
            sqlx::query(&format!(
                "SELECT {columns} FROM chat_messages WHERE chat_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
            ))
            .bind(chat_id)
            .bind(i64::from(limit))
            .fetch_all(conn)
            .await?
        }
    };
    let mut messages = rows.iter().map(message_from_row).collect::<Result<Vec<_>, _>>()?;
    messages.reverse();
    Ok(messages)
}

/// Where `messages_before` (a message of this chat) sits in the chat's order.
async fn message_position(conn: &mut AnyConnection, chat_id: &str, message_id: &str) -> ServiceResult<(i64, String)> {
    let unknown = || ServiceError::invalid_field("messagesBefore", "must be the id of a message of this chat");
    if uuid::Uuid::parse_str(message_id).is_err() {
        return Err(unknown());
    }
    let row = sqlx::query("SELECT created_at, id FROM chat_messages WHERE id = $1 AND chat_id = $2")
        .bind(message_id)
        .bind(chat_id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(unknown)?;
    Ok((row.try_get("created_at")?, row.try_get("id")?))
}

impl ConversationStore {
    /// Creates the chat, or updates it when the team has one with this `external_id`; the
    /// same report twice writes nothing the second time, and concurrent first reports make
    /// one chat (as `upsert_call`). A new chat is `active`.
    pub async fn upsert_chat(&self, team_id: &str, new: NewChat) -> ServiceResult<Chat> {
        check_ids(&[("teamId", team_id)])?;
        validate_new_chat(&new)?;
        let lock = self.db.for_update();
        let mut tx = self.db.begin_write().await?;
        let chat = conversation::upsert::<Chat>(&mut tx, team_id, &new, lock).await?;
        tx.commit().await?;
        Ok(chat)
    }

    /// Adds messages, all or none, to an active or ended chat. A message whose external id
    /// the chat has already is left as it is; `message_count` and `last_message_at` follow.
    pub async fn append_chat_messages(
        &self,
        team_id: &str,
        external_id: &str,
        messages: Vec<NewMessage>,
    ) -> ServiceResult<Appended> {
        check_ids(&[("teamId", team_id)])?;
        validate_messages(external_id, &messages)?;
        let messages = first_of_each_id(messages);
        let mut tx = self.db.begin_write().await?;
        let chat = find::<Chat>(&mut tx, team_id, Key::External(external_id), self.db.for_update()).await?;
        let inserted = insert_messages(&mut tx, &chat, &messages).await?;
        let new: Vec<&NewMessage> = messages.iter().filter(|m| inserted.contains(&m.external_id)).collect();
        let mut total = i64::from(chat.message_count);
        if let Some(newest) = new.iter().map(|m| m.created_at_ms).max() {
            let texts = new.iter().map(|m| m.text.as_str());
            search::add(&mut tx, Kind::Chat, (&chat.id, &chat.team_id), Source::Messages, texts).await?;
            total += i64::try_from(new.len()).unwrap_or(i64::MAX);
            let last = chat.last_message_at_ms.map_or(newest, |last| last.max(newest));
            sqlx::query("UPDATE chats SET message_count = $1, last_message_at = $2, updated_at = $3 WHERE id = $4")
                .bind(total)
                .bind(last)
                .bind(now_ms())
                .bind(chat.id.as_str())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Appended {
            appended: u32::try_from(new.len()).unwrap_or(u32::MAX),
            total: u32::try_from(total).unwrap_or(u32::MAX),
        })
    }

    /// Ends the chat (status `ended`) with its end time and, when given, summary (absent
    /// keeps the stored one). Ending again with the same values writes nothing.
    pub async fn end_chat(&self, team_id: &str, external_id: &str, end: ChatEnd) -> ServiceResult<Chat> {
        check_ids(&[("teamId", team_id)])?;
        validate([
            external_id_violation("externalId", external_id),
            end.summary.as_deref().and_then(|summary| limits::SUMMARY.check("summary", summary)),
        ])?;
        let mut tx = self.db.begin_write().await?;
        let current = find::<Chat>(&mut tx, team_id, Key::External(external_id), self.db.for_update()).await?;
        if end.ended_at_ms < current.created_at_ms {
            return Err(ServiceError::invalid_field("endedAt", "must not be before the chat's start"));
        }
        let mut chat = current.clone();
        chat.status = ChatStatus::Ended.as_str().to_owned();
        chat.ended_at_ms = Some(end.ended_at_ms);
        chat.summary = end.summary.or(current.summary.clone());
        if chat != current {
            chat.updated_at_ms = now_ms();
            sqlx::query("UPDATE chats SET status = $1, ended_at = $2, summary = $3, updated_at = $4 WHERE id = $5")
                .bind(chat.status.as_str())
                .bind(chat.ended_at_ms)
                .bind(chat.summary.as_deref())
                .bind(chat.updated_at_ms)
                .bind(chat.id.as_str())
                .execute(&mut *tx)
                .await?;
        }
        if current.ended_at_ms.is_none() {
            // Webhooks hear of the end once; ending again (a runtime's retry) tells nobody.
            let resource = switchboard_proto::v1::event::Resource::Chat(chat.clone());
            switchboard_kit::outbox::record(&mut tx, EventType::ChatEnded, (team_id, &chat.id), resource).await?;
        }
        tx.commit().await?;
        Ok(chat)
    }

    /// The chat with the newest `messages_limit` messages before the message
    /// `messages_before` (or the newest of all), oldest first: a client pages back through a
    /// long chat by passing the first message it holds.
    pub async fn chat(
        &self,
        team_id: &str,
        chat_id: &str,
        messages_limit: u32,
        messages_before: Option<&str>,
    ) -> ServiceResult<Chat> {
        check_ids(&[("teamId", team_id), ("chatId", chat_id)])?;
        validate([limits::CHAT_MESSAGES.check("messagesLimit", i64::from(messages_limit))])?;
        let mut conn = self.db.pool().acquire().await?;
        let mut chat = find::<Chat>(&mut conn, team_id, Key::Id(chat_id), "").await?;
        let before = match messages_before {
            Some(message_id) => Some(message_position(&mut conn, &chat.id, message_id).await?),
            None => None,
        };
        chat.messages = messages_page(&mut conn, &chat.id, messages_limit, before).await?;
        Ok(chat)
    }

    /// The chat named by its runtime's id, without messages.
    pub async fn chat_by_external_id(&self, team_id: &str, external_id: &str) -> ServiceResult<Chat> {
        self.by_external_id::<Chat>(team_id, external_id).await
    }

    /// A page of the team's chats, without messages. Ties of the sort key go by id in the
    /// same direction, and chats without messages come last when sorting by
    /// `lastMessageAt`, either way.
    pub async fn list_chats(&self, team_id: &str, filter: &ChatFilter) -> ServiceResult<(Vec<Chat>, PageInfo)> {
        check_ids(&[("teamId", team_id)])?;
        validate_filter(filter)?;

        let (key, nullable) = match filter.sort {
            ChatSort::CreatedAt => ("c.created_at", false),
            ChatSort::LastMessageAt => ("c.last_message_at", true),
        };
        let order = Order { key, nullable, ascending: filter.ascending };
        let mut conn = self.db.pool().acquire().await?;
        let conditions = self.chat_conditions(&mut conn, team_id, filter).await?;
        read_page::<Chat>(&mut conn, order, &conditions, (filter.page, filter.limit)).await
    }

    /// The list's conditions; a search reads the text index on `conn` (see [`Filter::search`]).
    pub(super) async fn chat_conditions(
        &self,
        conn: &mut AnyConnection,
        team_id: &str,
        filter: &ChatFilter,
    ) -> ServiceResult<Filter> {
        let engine = self.db.engine();
        let mut conditions = Filter::for_team(engine, "c", team_id, filter.search.is_some());
        let text = |value: &str| Some(Arg::Text(value.to_owned()));
        conditions.compare_each([
            ("c.channel =", filter.channel.and_then(|channel| text(channel.as_str()))),
            ("c.agent_id =", filter.agent_id.as_deref().and_then(text)),
            ("c.status =", filter.status.and_then(|status| text(status.as_str()))),
            ("c.created_at >=", filter.created_from_ms.map(Arg::Int)),
            ("c.created_at <=", filter.created_to_ms.map(Arg::Int)),
        ]);
        if let Some(query) = filter.search.as_deref().map(listing::normalise_query) {
            conditions.search(conn, engine, (Kind::Chat.index(), "c"), &query).await?;
        }
        Ok(conditions)
    }

    /// Deletes the chat with its messages and search rows, all at once; returns it as it was
    /// (without messages).
    pub async fn delete_chat(&self, team_id: &str, chat_id: &str) -> ServiceResult<Chat> {
        check_ids(&[("teamId", team_id), ("chatId", chat_id)])?;
        let mut tx = self.db.begin_write().await?;
        let chat = find::<Chat>(&mut tx, team_id, Key::Id(chat_id), self.db.for_update()).await?;
        conversation::delete(&mut tx, team_id, &chat).await?;
        tx.commit().await?;
        Ok(chat)
    }
}
