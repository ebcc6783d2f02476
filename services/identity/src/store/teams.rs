//! Teams, the agency tree (an agency team and its client subteams) and subscriptions.

use sqlx::{AnyConnection, Row};
use switchboard_api::role::Role;
use switchboard_kit::listing::{self, Total};
use switchboard_kit::time::now_ms;
use switchboard_kit::vocabulary::EventType;
use switchboard_kit::{ServiceError, ServiceResult, limits};
use switchboard_proto::v1::{
    AccessConfig, Client, Identity, NewUser, PageInfo, PageRequest, SignedIn, Subscription, Subteam, Team, TeamRef,
    User,
};

use super::accounts::SessionTimes;
use super::credits::{self, Kind};
use super::{IdentityStore, TEAM_COLUMNS, check_id, team_from_row};
use crate::validate;

pub const DEFAULT_PLAN: &str = "self-hosted";
pub const DEFAULT_PERIOD_MS: i64 = 30 * 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, Default)]
pub struct NewTeam {
    pub name: String,
    pub owns_agency: bool,
    pub parent_team_id: Option<String>,
    pub initial_credits: i64,
    pub access: Option<AccessConfig>,
    pub plan: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NewSubteam {
    pub agency_team_id: String,
    pub team_name: String,
    pub user: NewUser,
    pub total_monthly_credits: i64,
    pub access: Option<AccessConfig>,
    /// How long the first user's invitation link lasts.
    pub invite_valid_ms: i64,
}

pub fn full_access() -> AccessConfig {
    AccessConfig {
        users: true,
        instructions: true,
        instructions_write: true,
        testing: true,
        knowledge_base: true,
        agent_configuration: true,
        agent_creation: true,
        conversations: true,
        crm: true,
    }
}

async fn insert_team(
    conn: &mut AnyConnection,
    new: &NewTeam,
    monthly_credits: i64,
    period_ms: i64,
) -> ServiceResult<Team> {
    let access = new.access.unwrap_or_else(full_access);
    let team = Team {
        id: uuid::Uuid::new_v4().to_string(),
        name: new.name.trim().to_owned(),
        created_at_ms: now_ms(),
        parent_team_id: new.parent_team_id.clone(),
        owns_agency: new.owns_agency,
        access: Some(access),
        monthly_credits,
        deleted: false,
    };
    let flag = switchboard_kit::db::flag;
    sqlx::query(
        "INSERT INTO teams (id, name, parent_team_id, owns_agency, monthly_credits, access_users, \
         access_instructions, access_instructions_write, access_testing, access_knowledge_base, \
         access_agent_configuration, access_agent_creation, access_conversations, access_crm, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )
    .bind(&team.id)
    .bind(&team.name)
    .bind(&team.parent_team_id)
    .bind(flag(team.owns_agency))
    .bind(monthly_credits)
    .bind(flag(access.users))
    .bind(flag(access.instructions))
    .bind(flag(access.instructions_write))
    .bind(flag(access.testing))
    .bind(flag(access.knowledge_base))
    .bind(flag(access.agent_configuration))
    .bind(flag(access.agent_creation))
    .bind(flag(access.conversations))
    .bind(flag(access.crm))
    .bind(team.created_at_ms)
    .execute(&mut *conn)
    .await?;
    credits::open_account(conn, &team.id).await?;
    sqlx::query("INSERT INTO subscriptions (team_id, plan, status, current_period_end) VALUES ($1, $2, 'active', $3)")
        .bind(&team.id)
        .bind(new.plan.as_deref().unwrap_or(DEFAULT_PLAN))
        .bind(team.created_at_ms + period_ms)
        .execute(&mut *conn)
        .await?;
    Ok(team)
}

pub(super) async fn team_in(conn: &mut AnyConnection, team_id: &str) -> ServiceResult<Option<Team>> {
    let row = sqlx::query(&format!("SELECT {TEAM_COLUMNS} FROM teams t WHERE t.id = $1"))
        .bind(team_id)
        .fetch_optional(conn)
        .await?;
    Ok(row.as_ref().map(team_from_row).transpose()?)
}

/// The end of the billing period that contains `now`: periods follow each other every
/// `period_ms` from the stored end, so the value never goes stale without a writer.
pub(super) fn current_period_end(stored_end: i64, now: i64, period_ms: i64) -> i64 {
    if stored_end > now {
        return stored_end;
    }
    let elapsed_periods = (now - stored_end) / period_ms + 1;
    stored_end + elapsed_periods * period_ms
}

impl IdentityStore {
    pub async fn create_team(&self, new: NewTeam) -> ServiceResult<Team> {
        validate::all([
            limits::TEAM_NAME.check("name", &new.name),
            (new.initial_credits < 0)
                .then(|| switchboard_kit::FieldViolation::new("initialCredits", "must not be negative")),
            new.parent_team_id.as_deref().and_then(|id| validate::uuid("parentTeamId", id)),
        ])?;
        let mut tx = self.db.begin_write().await?;
        if let Some(parent) = &new.parent_team_id {
            let parent =
                team_in(&mut tx, parent).await?.filter(|t| !t.deleted).ok_or_else(ServiceError::team_not_found)?;
            if !parent.owns_agency {
                return Err(ServiceError::forbidden("The parent team does not own an agency"));
            }
        }
        let team = insert_team(&mut tx, &new, new.initial_credits, self.period_ms).await?;
        if new.initial_credits > 0 {
            credits::apply(&mut tx, &team.id, new.initial_credits, Kind::Grant, "initial credits", None).await?;
        }
        tx.commit().await?;
        Ok(team)
    }

    /// Sign-up: a new team, its owner with a password, and a session for them; all or nothing.
    pub async fn sign_up(
        &self,
        new: NewTeam,
        owner: &NewUser,
        password_hash: &str,
        client: &Client,
        times: SessionTimes,
    ) -> ServiceResult<SignedIn> {
        validate::all([
            limits::TEAM_NAME.check("teamName", &new.name),
            limits::PERSON_NAME.check("firstName", &owner.first_name),
            limits::PERSON_NAME.check("lastName", &owner.last_name),
            validate::email("email", owner.email.trim()),
        ])?;
        let mut tx = self.db.begin_write().await?;
        let team = insert_team(&mut tx, &new, 0, self.period_ms).await?;
        if new.initial_credits > 0 {
            credits::apply(&mut tx, &team.id, new.initial_credits, Kind::Grant, "sign-up credits", None).await?;
        }
        let owner = NewUser { role: Role::Owner.as_str().to_owned(), ..owner.clone() };
        let user = super::users::insert_user(&mut tx, &team.id, &owner).await?;
        super::accounts::set_password_in(&mut tx, &user.id, password_hash).await?;
        let signed_in = super::accounts::begin_session_in(&mut tx, &user, client, times).await?;
        tx.commit().await?;
        Ok(signed_in)
    }

    /// A live team. Deleted or unknown teams are NotFound.
    pub async fn team(&self, team_id: &str) -> ServiceResult<Team> {
        check_id("teamId", team_id)?;
        let mut conn = self.db.pool().acquire().await?;
        team_in(&mut conn, team_id).await?.filter(|t| !t.deleted).ok_or_else(ServiceError::team_not_found)
    }

    /// Soft delete: the team's rows stay for the ledger, its keys now meet "team not found".
    pub async fn delete_team(&self, team_id: &str) -> ServiceResult<Team> {
        check_id("teamId", team_id)?;
        let updated = sqlx::query("UPDATE teams SET deleted_at = $1 WHERE id = $2 AND deleted_at IS NULL")
            .bind(now_ms())
            .bind(team_id)
            .execute(self.db.pool())
            .await?;
        if updated.rows_affected() == 0 {
            return Err(ServiceError::team_not_found());
        }
        let mut conn = self.db.pool().acquire().await?;
        team_in(&mut conn, team_id).await?.ok_or_else(ServiceError::team_not_found)
    }

    pub async fn count_teams(&self) -> ServiceResult<i64> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM teams").fetch_one(self.db.pool()).await?;
        Ok(row.try_get("n")?)
    }

    /// The subteam `team_id` of the agency `agency_team_id`: Forbidden when the agency owns
    /// no agency or the team is not one of its clients (whether or not it exists, so that
    /// team ids of others cannot be probed), NotFound when it was one and has been deleted.
    pub async fn resolve_subteam(&self, agency_team_id: &str, team_id: &str) -> ServiceResult<Team> {
        validate::all([validate::uuid("agencyTeamId", agency_team_id), validate::uuid("teamId", team_id)])?;
        let mut conn = self.db.pool().acquire().await?;
        let agency = team_in(&mut conn, agency_team_id)
            .await?
            .filter(|t| !t.deleted)
            .ok_or_else(ServiceError::team_not_found)?;
        if team_id == agency.id {
            return Ok(agency);
        }
        if !agency.owns_agency {
            return Err(ServiceError::forbidden("This API key's team does not own an agency")
                .with_hint("teamId can only be used with the key of an agency team."));
        }
        let team = team_in(&mut conn, team_id)
            .await?
            .filter(|t| t.parent_team_id.as_deref() == Some(agency_team_id))
            .ok_or_else(|| ServiceError::forbidden("teamId is not a client subteam of this agency"))?;
        if team.deleted {
            return Err(ServiceError::team_not_found());
        }
        Ok(team)
    }

    /// Creates a client subteam, its first user (the owner) and its credit allowance, taken
    /// from the agency's balance: all of it or nothing.
    pub async fn create_subteam(&self, new: NewSubteam) -> ServiceResult<Subteam> {
        validate::all([
            validate::uuid("agencyTeamId", &new.agency_team_id),
            limits::SUBTEAM_NAME.check("teamName", &new.team_name),
            limits::PERSON_NAME.check("firstName", &new.user.first_name),
            limits::PERSON_NAME.check("lastName", &new.user.last_name),
            validate::email("email", &new.user.email),
            limits::MONTHLY_CREDITS.check("totalMonthlyCredits", new.total_monthly_credits),
        ])?;
        let mut tx = self.db.begin_write().await?;
        let agency = team_in(&mut tx, &new.agency_team_id)
            .await?
            .filter(|t| !t.deleted)
            .ok_or_else(ServiceError::team_not_found)?;
        if !agency.owns_agency {
            return Err(ServiceError::forbidden("This API key's team does not own an agency"));
        }
        let team = insert_team(
            &mut tx,
            &NewTeam {
                name: new.team_name.clone(),
                parent_team_id: Some(agency.id.clone()),
                access: new.access,
                ..NewTeam::default()
            },
            new.total_monthly_credits,
            self.period_ms,
        )
        .await?;
        let user = super::users::insert_user(
            &mut tx,
            &team.id,
            &NewUser { role: Role::Owner.as_str().to_owned(), ..new.user.clone() },
        )
        .await?;
        let mut balance = 0;
        if new.total_monthly_credits > 0 {
            let reason = "subteam monthly credits";
            credits::apply(&mut tx, &agency.id, -new.total_monthly_credits, Kind::TransferOut, reason, Some(&team.id))
                .await
                .map_err(|e| match e.kind {
                    switchboard_kit::ErrorKind::InsufficientCredits => e.with_hint(
                        "The agency's balance is smaller than totalMonthlyCredits; lower it or add credits.",
                    ),
                    _ => e,
                })?;
            balance = credits::apply(
                &mut tx,
                &team.id,
                new.total_monthly_credits,
                Kind::TransferIn,
                reason,
                Some(&agency.id),
            )
            .await?
            .balance_after;
        }
        let link = super::links::NewLink {
            kind: super::links::LinkKind::Invite,
            team_id: &team.id,
            email: &user.email,
            role: &user.role,
            user_id: Some(&user.id),
            created_by: None,
            valid_ms: new.invite_valid_ms,
        };
        let invitation = super::links::insert_link(&mut tx, &link).await?;
        let subteam = Subteam { team: Some(team), credit_balance: balance, users: vec![user], invite_token: None };
        // The agency's webhooks hear of it.
        let resource = switchboard_proto::v1::event::Resource::Subteam(subteam.clone());
        let subteam_id = subteam.team.as_ref().map(|team| team.id.clone()).unwrap_or_default();
        switchboard_kit::outbox::record(&mut tx, EventType::SubteamCreated, (&agency.id, &subteam_id), resource)
            .await?;
        tx.commit().await?;
        Ok(Subteam { invite_token: Some(invitation.token), ..subteam })
    }

    pub async fn list_subteams(
        &self,
        agency_team_id: &str,
        page: &PageRequest,
    ) -> ServiceResult<(Vec<Subteam>, PageInfo)> {
        check_id("agencyTeamId", agency_team_id)?;
        let agency = self.team(agency_team_id).await?;
        if !agency.owns_agency {
            return Err(ServiceError::forbidden("This API key's team does not own an agency"));
        }
        let (limit, page_number) = (i64::from(page.limit.clamp(1, 100)), i64::from(page.page.max(1)));
        let order_column = match page.sort_by.as_str() {
            "name" => "t.name",
            _ => "t.created_at",
        };
        let direction = if page.ascending { "ASC" } else { "DESC" };
        let total: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM teams WHERE parent_team_id = $1 AND deleted_at IS NULL")
                .bind(agency_team_id)
                .fetch_one(self.db.pool())
                .await?
                .try_get("n")?;
        let rows = sqlx::query(&format!(
            "SELECT {TEAM_COLUMNS}, b.balance FROM teams t JOIN credit_balances b ON b.team_id = t.id \
             WHERE t.parent_team_id = $1 AND t.deleted_at IS NULL \
             ORDER BY {order_column} {direction}, t.id {direction} LIMIT $2 OFFSET $3"
        ))
        .bind(agency_team_id)
        .bind(limit)
        .bind((page_number - 1) * limit)
        .fetch_all(self.db.pool())
        .await?;
        let mut subteams = Vec::with_capacity(rows.len());
        for row in &rows {
            subteams.push(Subteam {
                team: Some(team_from_row(row)?),
                credit_balance: row.try_get("balance")?,
                users: Vec::new(),
                invite_token: None,
            });
        }
        let team_ids: Vec<String> = subteams.iter().filter_map(|s| s.team.as_ref().map(|t| t.id.clone())).collect();
        let mut users = self.users_of(&team_ids).await?;
        for subteam in &mut subteams {
            let id = subteam.team.as_ref().map(|t| t.id.as_str()).unwrap_or_default();
            subteam.users = users.remove(id).unwrap_or_default();
        }
        let (page, limit) = (u32::try_from(page_number).unwrap_or(1), u32::try_from(limit).unwrap_or(20));
        Ok((subteams, listing::page_info(page, limit, Total::exact(total))))
    }

    /// What `GET /me` shows of a team.
    pub async fn identity(&self, team_id: &str) -> ServiceResult<Identity> {
        check_id("teamId", team_id)?;
        self.identities(&[team_id.to_owned()]).await?.pop().ok_or_else(ServiceError::team_not_found)
    }

    /// What `GET /me` shows of each team that exists (malformed ids and unknown or deleted
    /// teams are left out), in one query: the gateway batches the reads of concurrent
    /// `GET /me` calls of many teams into one.
    pub async fn identities(&self, team_ids: &[String]) -> ServiceResult<Vec<Identity>> {
        let ids: Vec<&String> = team_ids.iter().filter(|id| check_id("teamId", id).is_ok()).collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT {TEAM_COLUMNS}, b.balance, s.plan, s.status, s.current_period_end, p.name AS agency_name \
             FROM teams t JOIN credit_balances b ON b.team_id = t.id JOIN subscriptions s ON s.team_id = t.id \
             LEFT JOIN teams p ON p.id = t.parent_team_id WHERE t.id IN ({}) AND t.deleted_at IS NULL",
            placeholders.join(", ")
        );
        let mut query = sqlx::query(&sql);
        for id in ids {
            query = query.bind(id.as_str());
        }
        let now = now_ms();
        query.fetch_all(self.db.pool()).await?.iter().map(|row| identity_from_row(row, now, self.period_ms)).collect()
    }

    pub(super) async fn users_of(
        &self,
        team_ids: &[String],
    ) -> ServiceResult<std::collections::HashMap<String, Vec<User>>> {
        let mut by_team: std::collections::HashMap<String, Vec<User>> = std::collections::HashMap::new();
        if team_ids.is_empty() {
            return Ok(by_team);
        }
        let placeholders: Vec<String> = (1..=team_ids.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT {} FROM users WHERE team_id IN ({}) ORDER BY created_at, id",
            super::users::USER_COLUMNS,
            placeholders.join(", ")
        );
        let mut query = sqlx::query(&sql);
        for id in team_ids {
            query = query.bind(id);
        }
        for row in query.fetch_all(self.db.pool()).await? {
            let user = super::users::user_from_row(&row)?;
            by_team.entry(user.team_id.clone()).or_default().push(user);
        }
        Ok(by_team)
    }
}

fn identity_from_row(row: &sqlx::any::AnyRow, now: i64, period_ms: i64) -> ServiceResult<Identity> {
    let team = team_from_row(row)?;
    let stored_end: Option<i64> = row.try_get("current_period_end")?;
    let agency_name: Option<String> = row.try_get("agency_name")?;
    let agency_team = match (&team.parent_team_id, agency_name) {
        (Some(id), Some(name)) => Some(TeamRef { id: id.clone(), name }),
        _ => None,
    };
    Ok(Identity {
        credit_balance: row.try_get("balance")?,
        subscription: Some(Subscription {
            plan: row.try_get("plan")?,
            status: row.try_get("status")?,
            current_period_end_ms: stored_end.map(|end| current_period_end(end, now, period_ms)),
        }),
        agency_team,
        team: Some(team),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn billing_periods_roll_forward() {
        let end = 1_000;
        let period = DEFAULT_PERIOD_MS;
        assert_eq!(current_period_end(end, 500, period), end);
        assert_eq!(current_period_end(end, end, period), end + period);
        assert_eq!(current_period_end(end, end + period + 1, period), end + 2 * period);
    }
}
