//! What calls and chats share as conversations a runtime reports: a row per conversation of
//! a team, named by our id or the runtime's `external_id`, upserted with the same race rule,
//! and deleted with its parts and its search row in one transaction. What differs (a call's
//! transcript, timeline, end and recording; a chat's messages and status) stays in `calls`
//! and `chats`.

use std::future::Future;

use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use switchboard_kit::{FieldViolation, ServiceError, ServiceResult, limits};

use switchboard_kit::listing::{self, Filter, Listing};
use switchboard_kit::validate;
use switchboard_proto::v1::PageInfo;

use super::search::{self, Kind};
use super::{ConversationStore, Key, check_ids};

/// A kind of conversation and how its rows are read and written.
pub(super) trait Conversation: Sized + Send {
    /// What the runtime reports to create or update one.
    type New: Sync;
    /// Its table, aliased `c` in [`Conversation::COLUMNS`].
    const TABLE: &'static str;
    const COLUMNS: &'static str;
    /// The tables of its parts, each keyed by [`Conversation::PART_KEY`].
    const PARTS: &'static [&'static str];
    const PART_KEY: &'static str;
    const SEARCH: Kind;

    fn from_row(row: &AnyRow) -> Result<Self, sqlx::Error>;
    fn not_found() -> ServiceError;
    fn id(&self) -> &str;
    fn external_id(new: &Self::New) -> &str;
    /// Inserts a new one; `None` when a concurrent upsert inserted it first.
    fn insert(
        conn: &mut AnyConnection,
        team_id: &str,
        new: &Self::New,
    ) -> impl Future<Output = ServiceResult<Option<Self>>> + Send;
    /// Applies what differs between the stored one and the report.
    fn update(
        conn: &mut AnyConnection,
        current: Self,
        new: &Self::New,
    ) -> impl Future<Output = ServiceResult<Self>> + Send;
}

/// The conversation without its parts, if the team has it; `lock` is `Db::for_update` in a
/// writing transaction, so that concurrent writers of one conversation take turns.
pub(super) async fn find_row<C: Conversation>(
    conn: &mut AnyConnection,
    team_id: &str,
    key: Key<'_>,
    lock: &str,
) -> ServiceResult<Option<C>> {
    let (column, value) = key.column();
    let sql = format!("SELECT {} FROM {} c WHERE c.team_id = $1 AND c.{column} = $2{lock}", C::COLUMNS, C::TABLE);
    let row = sqlx::query(&sql).bind(team_id).bind(value).fetch_optional(conn).await?;
    Ok(row.as_ref().map(C::from_row).transpose()?)
}

/// As [`find_row`], or its 404.
pub(super) async fn find<C: Conversation>(
    conn: &mut AnyConnection,
    team_id: &str,
    key: Key<'_>,
    lock: &str,
) -> ServiceResult<C> {
    find_row(conn, team_id, key, lock).await?.ok_or_else(C::not_found)
}

/// Creates the conversation, or updates it when the team has one with the report's
/// `external_id`: the same report twice writes nothing the second time. Two concurrent first
/// reports make one: the insert that loses the unique (team, external_id) race finds the
/// winner's row and updates it.
pub(super) async fn upsert<C: Conversation>(
    conn: &mut AnyConnection,
    team_id: &str,
    new: &C::New,
    lock: &str,
) -> ServiceResult<C> {
    let key = Key::External(C::external_id(new));
    if let Some(current) = find_row::<C>(conn, team_id, key, lock).await? {
        return C::update(conn, current, new).await;
    }
    match C::insert(conn, team_id, new).await? {
        Some(inserted) => Ok(inserted),
        None => {
            let current = find::<C>(conn, team_id, key, lock).await?;
            C::update(conn, current, new).await
        }
    }
}

/// How a list is sorted: the key's column, whether it may be NULL (such rows come last either
/// way), and the direction.
pub(super) struct Order<'a> {
    pub key: &'a str,
    pub nullable: bool,
    pub ascending: bool,
}

/// A page (from 1) of `limit` conversations that pass `conditions`, without their parts; ties
/// of the sort key go by id in the same direction, so that paging neither loses nor repeats one.
pub(super) async fn read_page<C: Conversation>(
    conn: &mut AnyConnection,
    order: Order<'_>,
    conditions: &Filter,
    (page, limit): (u32, u32),
) -> ServiceResult<(Vec<C>, PageInfo)> {
    let from = format!("{} c", C::TABLE);
    let Order { key, nullable, ascending } = order;
    let listing = Listing { columns: C::COLUMNS, from: &from, key, id: "c.id", nullable, ascending };
    let offset = (i64::from(page) - 1) * i64::from(limit);
    let (rows, total) = listing::read_page(conn, &listing, conditions, offset, i64::from(limit)).await?;
    let conversations = rows.iter().map(C::from_row).collect::<Result<Vec<_>, _>>()?;
    Ok((conversations, listing::page_info(page, limit, total)))
}

impl ConversationStore {
    /// The conversation named by its runtime's id, without its parts.
    pub(super) async fn by_external_id<C: Conversation>(&self, team_id: &str, external_id: &str) -> ServiceResult<C> {
        check_ids(&[("teamId", team_id)])?;
        validate([external_id_violation("externalId", external_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        find::<C>(&mut conn, team_id, Key::External(external_id), "").await
    }
}

/// Deletes the conversation's search row, parts and row (in the caller's transaction).
pub(super) async fn delete<C: Conversation>(
    conn: &mut AnyConnection,
    team_id: &str,
    conversation: &C,
) -> ServiceResult<()> {
    search::forget(conn, C::SEARCH, conversation.id()).await?;
    for table in C::PARTS {
        sqlx::query(&format!("DELETE FROM {table} WHERE {} = $1", C::PART_KEY))
            .bind(conversation.id())
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query(&format!("DELETE FROM {} WHERE id = $1 AND team_id = $2", C::TABLE))
        .bind(conversation.id())
        .bind(team_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// A runtime's id of a conversation (or of a chat message), within its bounds.
pub(super) fn external_id_violation(field: &str, external_id: &str) -> Option<FieldViolation> {
    limits::EXTERNAL_ID.check(field, external_id)
}
