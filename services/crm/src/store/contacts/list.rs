//! Listing contacts: a page of the team's contacts, filtered, searched and sorted, planned so
//! that a page costs about the same however large the team (the plans and their rates:
//! BENCHMARKS.md, "Why the lists are planned the way they are"). A total that a filter alone
//! tells is used rather than counted again.

use sqlx::AnyConnection;
use sqlx::Row;
use sqlx::any::AnyRow;
use switchboard_kit::db::Engine;
use switchboard_kit::listing::{self, Arg, Filter, Listing, Step, TextIndex, Total};
use switchboard_kit::{ServiceResult, limits, phone, validate};
use switchboard_proto::v1::ListContactsResponse;

use super::read::hydrate;
use super::{CONTACT_COLUMNS, contact_from_row};
use crate::store::{ContactFilter, ContactSort, CrmStore, distinct, fields, id_list_violations, tags, uuid_violation};

/// Where a contact search reads: one short row per contact, so that up to 10,000 matches are
/// carried by id (a search sorted by last name walked far along its index otherwise, many
/// times slower: BENCHMARKS.md, "Why the lists are planned the way they are").
const CONTACT_TEXT: TextIndex = TextIndex {
    table: "contact_search",
    fts_table: "contact_search_fts",
    owner_column: "contact_id",
    carried_rows: 10_000,
    signature_column: None,
};

impl CrmStore {
    /// A page of the team's contacts (see [`ContactFilter`]), with the team's custom field
    /// schemas and all its tags. Ties of the sort key go by id in the same direction, and
    /// contacts without the key (no first name, say) come last either way.
    pub async fn list_contacts(&self, team_id: &str, filter: &ContactFilter) -> ServiceResult<ListContactsResponse> {
        let (search, number) = self.check_filter(team_id, filter)?;
        // Whether a filter besides the tags and the search narrows the list.
        let narrowed = filter.board_id.is_some()
            || filter.stage_id.is_some()
            || filter.assigned_user_id.is_some()
            || number.is_some();

        let listing = contact_listing(filter);
        let engine = self.db.engine();
        let mut conn = self.db.pool().acquire().await?;
        let tag_ids = distinct(filter.tag_ids.iter().cloned());
        let tag_ids_given = tag_ids.len();
        let (limit, page) = (i64::from(filter.limit), i64::from(filter.page));
        let offset = (page - 1) * limit;
        let alone = search.is_none() && !narrowed;
        let TagPlan { mut known_total, tag_bits } =
            plan_tags(&mut conn, engine, team_id, &tag_ids, alone, offset + limit).await?;
        let mut conditions = Filter::for_team(engine, "c", team_id, search.is_some());
        add_tag_conditions(&mut conditions, tag_ids, tag_bits);
        add_other_conditions(&mut conditions, filter, number);
        if let Some(query) = search.as_deref().filter(|_| known_total != Some(0)) {
            let found = conditions.search(&mut conn, engine, (&CONTACT_TEXT, "c"), query).await?;
            // A contact has one search row: with no other filter, the search counted them.
            let alone = tag_ids_given == 0 && !narrowed;
            if alone && let Some(found) = found {
                known_total = Some(i64::try_from(found).unwrap_or(i64::MAX));
            }
        }
        let (rows, total) = match known_total {
            Some(total) => (
                listing::read_counted_page(&mut conn, &listing, &conditions, (offset, limit), total).await?,
                Total::exact(total),
            ),
            None => listing::read_page(&mut conn, &listing, &conditions, offset, limit).await?,
        };
        page_response(&mut conn, team_id, filter, &rows, total).await
    }

    /// Checks the filter, every violation at once. Gives the search as it is looked for and
    /// the number in E.164.
    fn check_filter(&self, team_id: &str, filter: &ContactFilter) -> ServiceResult<(Option<String>, Option<String>)> {
        // Numbers are stored in E.164: `555-2671` is looked for as `5552671`.
        let search = filter
            .search
            .as_deref()
            .map(|query| phone::fragment(query).unwrap_or_else(|| listing::normalise_query(query)))
            .filter(|query| !query.is_empty());
        let mut violations = vec![
            uuid_violation("teamId", team_id),
            limits::PAGE.check("page", i64::from(filter.page)),
            limits::PAGE_LIMIT.check("limit", i64::from(filter.limit)),
            search.as_deref().and_then(|query| limits::CONTACT_SEARCH.check("search", query)),
            filter.board_id.as_deref().and_then(|id| uuid_violation("boardId", id)),
            filter.stage_id.as_deref().and_then(|id| uuid_violation("stageId", id)),
            filter.assigned_user_id.as_deref().and_then(|id| uuid_violation("assignedUserId", id)),
        ];
        violations.extend(id_list_violations("tagIds", &filter.tag_ids).into_iter().map(Some));
        let mut number_problems = Vec::new();
        let number = filter.number.as_deref().and_then(|number| self.number_value(number, &mut number_problems));
        violations.extend(number_problems.into_iter().map(Some));
        validate(violations)?;
        Ok((search, number))
    }
}

/// How the list walks the contacts for the filter's sort.
fn contact_listing(filter: &ContactFilter) -> Listing<'static> {
    let (key, nullable) = match filter.sort {
        ContactSort::CreatedAt => ("c.created_at", false),
        ContactSort::FirstName => ("c.first_name_key", true),
        ContactSort::LastName => ("c.last_name_key", true),
        ContactSort::Email => ("c.email", true),
        ContactSort::Number => ("c.number", false),
    };
    Listing { columns: CONTACT_COLUMNS, from: "contacts c", key, id: "c.id", nullable, ascending: filter.ascending }
}

/// What the tags alone tell of a list filtered by them.
#[derive(Default)]
struct TagPlan {
    /// How many contacts match, when the tags alone tell: none when a tag is not the team's;
    /// with no other filter, the count of the tags' links (a link joins a team's tag to one of
    /// its contacts only), which needs no join with the contacts.
    known_total: Option<i64>,
    /// The tags' bits, when the page is read as a walk along the sort index testing them
    /// (PostgreSQL, and a walk short enough: [`walks_short`]).
    tag_bits: Option<i64>,
}

/// Plans a list filtered by `tag_ids` (none: nothing to plan); `alone` when no other filter
/// nor a search narrows it, and `end` where its page ends.
async fn plan_tags(
    conn: &mut AnyConnection,
    engine: Engine,
    team_id: &str,
    tag_ids: &[String],
    alone: bool,
    end: i64,
) -> ServiceResult<TagPlan> {
    let mut plan = TagPlan::default();
    if tag_ids.is_empty() {
        return Ok(plan);
    }
    let owned = tags::tags_by_id(conn, team_id, tag_ids).await?;
    if owned.len() < tag_ids.len() {
        plan.known_total = Some(0);
    } else if alone {
        let total = count_tagged(conn, tag_ids).await?;
        plan.known_total = Some(total);
        if engine == Engine::Postgres && walks_short(conn, team_id, total, end).await? {
            plan.tag_bits = Some(tags::bit_mask(conn, team_id, tag_ids).await?);
        }
    }
    Ok(plan)
}

/// A contact must carry every one of `tag_ids`: tested by its tag bits first when they are
/// planned, so that only the contacts whose bits pass are probed for their links.
fn add_tag_conditions(conditions: &mut Filter, tag_ids: Vec<String>, tag_bits: Option<i64>) {
    if let Some(mask) = tag_bits {
        conditions.and(listing::weighed_a_third(&format!("(c.tag_bits & {mask}) = {mask}")));
    }
    for tag_id in tag_ids {
        let tag = conditions.arg(Arg::Text(tag_id));
        conditions.and(match tag_bits {
            // Only contacts whose bits passed are probed; the page is a walk along the sort
            // index that stops at the page.
            Some(_) => listing::probed_per_row(&format!(
                "FROM contact_tags ct WHERE ct.contact_id = c.id AND ct.tag_id = {tag}"
            )),
            None => format!("c.id IN (SELECT ct.contact_id FROM contact_tags ct WHERE ct.tag_id = {tag})"),
        });
    }
}

/// The filters besides the tags and the search: board, stage, assigned user and number.
fn add_other_conditions(conditions: &mut Filter, filter: &ContactFilter, number: Option<String>) {
    if let Some(board_id) = &filter.board_id {
        let board = conditions.arg(Arg::Text(board_id.clone()));
        conditions.and(format!("c.id IN (SELECT p.contact_id FROM contact_placements p WHERE p.board_id = {board})"));
    }
    if let Some(stage_id) = &filter.stage_id {
        let stage = conditions.arg(Arg::Text(stage_id.clone()));
        conditions.and(format!("c.id IN (SELECT p.contact_id FROM contact_placements p WHERE p.stage_id = {stage})"));
    }
    if let Some(user_id) = &filter.assigned_user_id {
        let user = conditions.arg(Arg::Text(user_id.clone()));
        conditions.and(format!(
            "c.id IN (SELECT a.contact_id FROM contact_assignments a WHERE a.team_id = $1 AND a.user_id = {user})"
        ));
    }
    if let Some(number) = number {
        // Numbers are unique in a team: at most one contact.
        let number = conditions.arg(Arg::Text(number));
        conditions.and(format!("c.number = {number}"));
    }
}

/// The page's contacts, whole, with the team's custom field schemas and all its tags.
async fn page_response(
    conn: &mut AnyConnection,
    team_id: &str,
    filter: &ContactFilter,
    rows: &[AnyRow],
    total: Total,
) -> ServiceResult<ListContactsResponse> {
    let contacts = rows.iter().map(contact_from_row).collect::<Result<Vec<_>, _>>()?;
    let contacts = hydrate(conn, contacts).await?;
    let team_fields = fields::team_fields(conn, team_id).await?;
    let available_tags = tags::team_tags(conn, team_id).await?;
    Ok(ListContactsResponse {
        contacts,
        page: Some(listing::page_info(filter.page, filter.limit, total)),
        custom_field_schemas: team_fields.iter().map(fields::schema).collect(),
        available_tags,
    })
}

/// Up to how many contacts a page of a tag-filtered list may expect to pass along its sort
/// index for the page to be read as a walk testing each contact's tag bits (see
/// `list_contacts`): an index-only walk passes contacts quickly, and probes the tag links only
/// of those whose bits match (its rate: BENCHMARKS.md, "Why the lists are planned the way they
/// are"). A longer walk (rare tags, deep pages) is left to the planner, which then starts from
/// the tags' links.
const TAG_WALK_CONTACTS: i64 = 20_000;

/// Whether a page ending at `end` of a list of `total` tagged contacts (PostgreSQL) lies within
/// [`TAG_WALK_CONTACTS`] of the start of the sort index, reckoning the team's size by the
/// planner's estimate.
async fn walks_short(conn: &mut AnyConnection, team_id: &str, total: i64, end: i64) -> ServiceResult<bool> {
    if total <= 0 {
        return Ok(false);
    }
    let team = Filter::for_team(Engine::Postgres, "c", team_id, false);
    let contacts = listing::estimate(conn, &team, &format!("SELECT 1 FROM contacts c WHERE {}", team.sql())).await?;
    Ok(end.min(total).saturating_mul(contacts) / total <= TAG_WALK_CONTACTS)
}

/// How many contacts carry every one of these tags (all the team's, at least one).
async fn count_tagged(conn: &mut AnyConnection, tag_ids: &[String]) -> ServiceResult<i64> {
    let mut sql = "SELECT COUNT(*) AS n FROM contact_tags t0 WHERE t0.tag_id = $1".to_owned();
    for n in 2..=tag_ids.len() {
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM contact_tags t{n} WHERE t{n}.contact_id = t0.contact_id AND t{n}.tag_id = ${n})"
        ));
    }
    listing::record(Step::Store("count tagged"), &sql, || tag_ids.iter().cloned().map(Arg::Text).collect());
    let mut query = sqlx::query(&sql);
    for tag_id in tag_ids {
        query = query.bind(tag_id.as_str());
    }
    Ok(query.fetch_one(conn).await?.try_get("n")?)
}
