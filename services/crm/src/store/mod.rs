//! The CRM store. SQL is written once for both engines (see `switchboard_kit::db`); rows come
//! back as the proto messages the service answers with. Every statement filters on the team:
//! another team's contact, note, tag, board, stage or field is `NOT_FOUND`.
//!
//! The store checks every value itself (lengths, ids, e-mails, numbers, custom field types),
//! so that a gRPC caller meets the same rules as the gateway. A request's violations are
//! reported together, with the public (camelCase) field names.

mod boards;
mod contacts;
mod fields;
mod notes;
mod tags;

pub use contacts::bulk_failure;

use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use switchboard_kit::db::Db;
use switchboard_kit::phone::PhoneRules;
use switchboard_kit::{ErrorKind, FieldViolation, ServiceError, ServiceResult};

/// What `GET /contacts` sorts by; ties go by id in the same direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContactSort {
    #[default]
    CreatedAt,
    FirstName,
    LastName,
    Email,
    Number,
}

impl ContactSort {
    pub const ALL: [ContactSort; 5] = [
        ContactSort::CreatedAt,
        ContactSort::FirstName,
        ContactSort::LastName,
        ContactSort::Email,
        ContactSort::Number,
    ];

    /// The public name (`sortBy`).
    pub fn as_str(self) -> &'static str {
        match self {
            ContactSort::CreatedAt => "createdAt",
            ContactSort::FirstName => "firstName",
            ContactSort::LastName => "lastName",
            ContactSort::Email => "email",
            ContactSort::Number => "number",
        }
    }

    pub fn parse(text: &str) -> Option<ContactSort> {
        Self::ALL.into_iter().find(|sort| sort.as_str() == text)
    }
}

/// What `GET /contacts` asks for. Filters are ANDed; ids that name nothing of the team's
/// (unknown, or another team's) match no contact rather than failing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactFilter {
    /// From 1.
    pub page: u32,
    pub limit: u32,
    /// A part of the first or last name, e-mail or number (case-insensitive).
    pub search: Option<String>,
    pub sort: ContactSort,
    pub ascending: bool,
    /// A contact must carry every one.
    pub tag_ids: Vec<String>,
    pub board_id: Option<String>,
    /// A stage the contact sits in on its board (not only its latest `crmStage`).
    pub stage_id: Option<String>,
    pub assigned_user_id: Option<String>,
    /// The contact with this number, in any spelling (a number that cannot be one is a 400).
    pub number: Option<String>,
}

impl Default for ContactFilter {
    fn default() -> Self {
        Self {
            page: 1,
            limit: 20,
            search: None,
            sort: ContactSort::CreatedAt,
            ascending: false,
            tag_ids: Vec::new(),
            board_id: None,
            stage_id: None,
            assigned_user_id: None,
            number: None,
        }
    }
}

#[derive(Clone)]
pub struct CrmStore {
    db: Db,
    phone: PhoneRules,
}

impl CrmStore {
    /// Connects (applying migrations); numbers without country code are read with `phone`.
    pub async fn open(url: &str, phone: PhoneRules) -> anyhow::Result<Self> {
        Ok(Self { db: Db::connect(url, &crate::MIGRATIONS).await?, phone })
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn phone_rules(&self) -> PhoneRules {
        self.phone
    }
}

pub fn contact_not_found() -> ServiceError {
    ServiceError::not_found("Contact not found")
}

pub fn note_not_found() -> ServiceError {
    ServiceError::not_found("Note not found")
}

pub fn tag_not_found() -> ServiceError {
    ServiceError::not_found("Tag not found")
}

pub fn board_not_found() -> ServiceError {
    ServiceError::not_found("Board not found")
}

pub fn stage_not_found() -> ServiceError {
    ServiceError::not_found("Stage not found")
}

pub fn field_not_found() -> ServiceError {
    ServiceError::not_found("Custom field not found")
}

/// A number another contact of the team has: its id is in the details, twice (as the
/// message of `number`, and alone as `contactId` for clients that read it).
pub fn contact_exists(existing_id: &str) -> ServiceError {
    ServiceError {
        details: vec![
            FieldViolation::new("number", format!("is already used by contact {existing_id}")),
            FieldViolation::new("contactId", existing_id),
        ],
        ..ServiceError::new(ErrorKind::ContactExists, "A contact with this number already exists")
    }
}

pub(crate) fn uuid_violation(field: &str, id: &str) -> Option<FieldViolation> {
    uuid::Uuid::parse_str(id).is_err().then(|| FieldViolation::new(field, "must be a UUID"))
}

pub(crate) fn check_ids(ids: &[(&str, &str)]) -> ServiceResult<()> {
    switchboard_kit::validate(ids.iter().map(|(field, id)| uuid_violation(field, id)))
}

/// The violations of a list of ids: too many, or one that is not a UUID (named in the
/// message, so that the client sees which).
pub(crate) fn id_list_violations(field: &str, ids: &[String]) -> Vec<FieldViolation> {
    let mut violations: Vec<FieldViolation> = count_violation(field, ids.len()).into_iter().collect();
    violations.extend(
        ids.iter()
            .filter(|id| uuid::Uuid::parse_str(id).is_err())
            .map(|id| FieldViolation::new(field, format!("must hold UUIDs only, not {id:?}"))),
    );
    violations
}

pub(crate) fn count_violation(field: &str, count: usize) -> Option<FieldViolation> {
    switchboard_kit::limits::ID_LIST.check(field, i64::try_from(count).unwrap_or(i64::MAX))
}

/// Distinct values, first occurrence first.
pub(crate) fn distinct<T: Clone + Eq + std::hash::Hash>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    values.into_iter().filter(|value| seen.insert(value.clone())).collect()
}

/// A value bound to a statement that the store builds row by row.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    Text(String),
    OptText(Option<String>),
    Int(i64),
}

/// Placeholders `$first, …` for `count` values.
pub(crate) fn placeholders(first: usize, count: usize) -> String {
    (first..first + count).map(|n| format!("${n}")).collect::<Vec<_>>().join(", ")
}

/// Values per statement when a store writes or reads many rows at once: well below
/// SQLite's 32,766 and PostgreSQL's 65,535 bound values.
const VALUES_PER_STATEMENT: usize = 3_000;

/// Runs `{head} VALUES (…), (…){tail}` for `rows` (all of one width), as few statements as
/// the bound on values allows; returns what `tail`'s `RETURNING` gives, if anything.
pub(crate) async fn insert_rows(
    conn: &mut AnyConnection,
    head: &str,
    tail: &str,
    rows: &[Vec<Val>],
) -> ServiceResult<Vec<AnyRow>> {
    let Some(width) = rows.first().map(Vec::len) else {
        return Ok(Vec::new());
    };
    let mut returned = Vec::new();
    for chunk in rows.chunks((VALUES_PER_STATEMENT / width.max(1)).max(1)) {
        let tuples: Vec<String> =
            (0..chunk.len()).map(|row| format!("({})", placeholders(1 + row * width, width))).collect();
        let sql = format!("{head} VALUES {}{tail}", tuples.join(", "));
        let mut query = sqlx::query(&sql);
        for value in chunk.iter().flatten() {
            query = match value {
                Val::Text(text) => query.bind(text.as_str()),
                Val::OptText(text) => query.bind(text.as_deref()),
                Val::Int(number) => query.bind(*number),
            };
        }
        returned.extend(query.fetch_all(&mut *conn).await?);
    }
    Ok(returned)
}

/// Runs `sql` (holding `{ids}` where an `IN` list goes, after `fixed` values bound first)
/// once per chunk of `ids`, and collects the rows.
pub(crate) async fn select_in(
    conn: &mut AnyConnection,
    sql: &str,
    fixed: &[&str],
    ids: &[String],
) -> ServiceResult<Vec<AnyRow>> {
    let mut rows = Vec::new();
    for chunk in ids.chunks(VALUES_PER_STATEMENT) {
        let sql = sql.replace("{ids}", &placeholders(fixed.len() + 1, chunk.len()));
        let mut query = sqlx::query(&sql);
        for value in fixed {
            query = query.bind(*value);
        }
        for id in chunk {
            query = query.bind(id.as_str());
        }
        rows.extend(query.fetch_all(&mut *conn).await?);
    }
    Ok(rows)
}
