//! The gRPC face of the identity store: unpacks requests, calls the store, maps errors.

use switchboard_kit::grpc::{Reply, reply};
use switchboard_kit::team_versions::{TeamVersions, announce};
use switchboard_kit::{ServiceError, ServiceResult};
use switchboard_proto::v1::identity_service_server::{IdentityService, IdentityServiceServer};
use switchboard_proto::v1::*;
use tonic::service::Routes;
use tonic::{Request, Status};

use crate::mail::{self, Mailer};
use crate::settings::AccountSettings;
use crate::store::{Debit, IdentityStore, NewSubteam, NewTeam, SubteamChange};

/// The most teams one `GetIdentities` call reads (the gateway asks for at most 256).
const MOST_IDENTITIES: usize = 1_000;

pub struct IdentityApi {
    store: IdentityStore,
    /// Present when the platform has a Redis: gateways then keep identities in memory until
    /// a change here gives the team a new version.
    versions: Option<TeamVersions>,
    settings: AccountSettings,
    mailer: Option<Mailer>,
}

/// The identity service's routes, ready for `switchboard_kit::grpc::serve`.
pub fn routes(
    store: IdentityStore,
    versions: Option<TeamVersions>,
    settings: AccountSettings,
    mailer: Option<Mailer>,
    sso_http: crate::sso_http::SsoHttp,
) -> Routes {
    let identity = IdentityApi { store: store.clone(), versions: versions.clone(), settings, mailer: mailer.clone() };
    Routes::new(IdentityServiceServer::new(identity))
        .add_service(crate::grpc::accounts::server(store, settings, mailer, versions, sso_http))
}

impl IdentityApi {
    /// After a change to what `GET /me` shows of these teams, or to which keys they have: new
    /// versions, before the answer.
    async fn changed<T>(&self, outcome: ServiceResult<T>, team_ids: &[&str]) -> ServiceResult<T> {
        if outcome.is_ok() {
            announce(self.versions.as_ref(), team_ids).await;
        }
        outcome
    }
}

fn required<T>(value: Option<T>, field: &str) -> Result<T, Status> {
    value.ok_or_else(|| ServiceError::invalid_field(field, "is required").into())
}

#[tonic::async_trait]
impl IdentityService for IdentityApi {
    async fn authenticate(&self, request: Request<AuthenticateRequest>) -> Reply<AuthenticateResponse> {
        let request = request.into_inner();
        reply(
            self.store
                .authenticate(&request.key_hash)
                .await
                .map(|(key, team)| AuthenticateResponse { key: Some(key), team: Some(team) }),
        )
    }

    async fn resolve_team(&self, request: Request<ResolveTeamRequest>) -> Reply<Team> {
        let request = request.into_inner();
        reply(self.store.resolve_subteam(&request.agency_team_id, &request.team_id).await)
    }

    async fn get_identity(&self, request: Request<GetIdentityRequest>) -> Reply<Identity> {
        reply(self.store.identity(&request.into_inner().team_id).await)
    }

    async fn get_identities(&self, request: Request<GetIdentitiesRequest>) -> Reply<GetIdentitiesResponse> {
        let team_ids = request.into_inner().team_ids;
        if team_ids.len() > MOST_IDENTITIES {
            return Err(Status::invalid_argument(format!("at most {MOST_IDENTITIES} team ids per call")));
        }
        reply(self.store.identities(&team_ids).await.map(|identities| GetIdentitiesResponse { identities }))
    }

    async fn get_team(&self, request: Request<GetTeamRequest>) -> Reply<Team> {
        reply(self.store.team(&request.into_inner().team_id).await)
    }

    async fn create_team(&self, request: Request<CreateTeamRequest>) -> Reply<Team> {
        let request = request.into_inner();
        reply(
            self.store
                .create_team(NewTeam {
                    name: request.name,
                    owns_agency: request.owns_agency,
                    parent_team_id: request.parent_team_id,
                    initial_credits: request.initial_credits,
                    access: request.access,
                    plan: Some(request.plan).filter(|p| !p.is_empty()),
                })
                .await,
        )
    }

    async fn delete_team(&self, request: Request<DeleteTeamRequest>) -> Reply<Team> {
        let team_id = request.into_inner().team_id;
        reply(self.changed(self.store.delete_team(&team_id).await, &[&team_id]).await)
    }

    /// The defaults of a subteam are the identity service's: 1000 monthly credits, and every
    /// access flag that is not given is on.
    async fn create_subteam(&self, request: Request<CreateSubteamRequest>) -> Reply<Subteam> {
        let request = request.into_inner();
        let user = required(request.user, "user")?;
        let access = request.access.map(|flags| AccessConfig {
            users: flags.users.unwrap_or(true),
            instructions: flags.instructions.unwrap_or(true),
            instructions_write: flags.instructions_write.unwrap_or(true),
            testing: flags.testing.unwrap_or(true),
            knowledge_base: flags.knowledge_base.unwrap_or(true),
            agent_configuration: flags.agent_configuration.unwrap_or(true),
            agent_creation: flags.agent_creation.unwrap_or(true),
            conversations: flags.conversations.unwrap_or(true),
            crm: flags.crm.unwrap_or(true),
        });
        let agency_team_id = request.agency_team_id.clone();
        let link_base = request.link_base.clone();
        let created = self
            .store
            .create_subteam(NewSubteam {
                agency_team_id: request.agency_team_id,
                team_name: request.team_name,
                user,
                total_monthly_credits: request
                    .total_monthly_credits
                    .unwrap_or(switchboard_kit::limits::MONTHLY_CREDITS.default),
                access,
                invite_valid_ms: self.settings.invite_valid_ms,
            })
            .await;
        if let (Ok(subteam), Some(mailer)) = (&created, self.mailer.as_ref().filter(|_| !link_base.is_empty())) {
            let first = subteam.users.first().map(|user| user.email.as_str()).unwrap_or_default();
            let team = subteam.team.as_ref().map(|team| team.name.as_str()).unwrap_or_default();
            if let Some(token) = &subteam.invite_token {
                mailer.send_later(mail::invitation(
                    first,
                    team,
                    &switchboard_kit::links::invite_url(&link_base, token),
                ));
            }
        }
        // The subteam's credits come out of the agency's balance.
        reply(self.changed(created, &[&agency_team_id]).await)
    }

    async fn list_subteams(&self, request: Request<ListSubteamsRequest>) -> Reply<ListSubteamsResponse> {
        let request = request.into_inner();
        let page = request.page.unwrap_or_default();
        reply(
            self.store
                .list_subteams(&request.agency_team_id, &page)
                .await
                .map(|(subteams, page)| ListSubteamsResponse { subteams, page: Some(page) }),
        )
    }

    async fn get_subteam(&self, request: Request<SubteamRequest>) -> Reply<Subteam> {
        let request = request.into_inner();
        reply(self.store.subteam(&request.agency_team_id, &request.team_id).await)
    }

    async fn update_subteam(&self, request: Request<UpdateSubteamRequest>) -> Reply<Subteam> {
        let request = request.into_inner();
        let change = SubteamChange {
            name: request.name,
            total_monthly_credits: request.total_monthly_credits,
            access: request.access,
        };
        let updated = self.store.update_subteam(&request.agency_team_id, &request.team_id, change).await;
        reply(self.changed(updated, &[&request.team_id]).await)
    }

    async fn delete_subteam(&self, request: Request<SubteamRequest>) -> Reply<Subteam> {
        let request = request.into_inner();
        let deleted = self.store.delete_subteam(&request.agency_team_id, &request.team_id).await;
        reply(self.changed(deleted, &[&request.team_id]).await)
    }

    async fn create_user(&self, request: Request<CreateUserRequest>) -> Reply<User> {
        let request = request.into_inner();
        let user = required(request.user, "user")?;
        reply(self.store.create_user(&request.team_id, &user).await)
    }

    async fn list_users(&self, request: Request<ListUsersRequest>) -> Reply<ListUsersResponse> {
        reply(self.store.list_users(&request.into_inner().team_id).await.map(|users| ListUsersResponse { users }))
    }

    async fn create_api_key(&self, request: Request<CreateApiKeyRequest>) -> Reply<CreatedApiKey> {
        let request = request.into_inner();
        let access = request.access();
        reply(self.store.create_key_by(&request.team_id, &request.name, access, request.created_by).await)
    }

    async fn list_api_keys(&self, request: Request<ListApiKeysRequest>) -> Reply<ListApiKeysResponse> {
        reply(self.store.list_keys(&request.into_inner().team_id).await.map(|keys| ListApiKeysResponse { keys }))
    }

    async fn revoke_api_key(&self, request: Request<RevokeApiKeyRequest>) -> Reply<ApiKey> {
        let request = request.into_inner();
        let revoked = self.store.revoke_key(&request.key_id, request.team_id.as_deref()).await;
        // Gateways trust a key's lookup while its team keeps its version.
        let team_id = revoked.as_ref().map(|key| key.team_id.clone()).unwrap_or_default();
        reply(self.changed(revoked, &[&team_id]).await)
    }

    async fn get_balance(&self, request: Request<GetBalanceRequest>) -> Reply<Balance> {
        let team_id = request.into_inner().team_id;
        reply(self.store.balance(&team_id).await.map(|balance| Balance { team_id, balance }))
    }

    async fn get_credits_alert(&self, request: Request<GetBalanceRequest>) -> Reply<CreditsAlert> {
        reply(self.store.credits_alert(&request.into_inner().team_id).await)
    }

    async fn set_credits_alert(&self, request: Request<SetCreditsAlertRequest>) -> Reply<CreditsAlert> {
        let request = request.into_inner();
        reply(self.store.set_credits_alert(&request.team_id, request.threshold).await)
    }

    async fn debit_credits(&self, request: Request<DebitCreditsRequest>) -> Reply<CreditEntry> {
        let request = request.into_inner();
        let debit = Debit {
            amount: request.amount,
            reason: &request.reason,
            reference_id: request.reference_id.as_deref(),
            up_to_balance: request.up_to_balance,
        };
        let debited = self.store.debit_with(&request.team_id, debit).await;
        if let Ok(entry) = &debited {
            // What was taken: less than asked when the balance ran short, and counted again
            // when a repeated reference answers the first entry (a retry).
            credits_debited().add(u64::try_from(-entry.delta).unwrap_or(0), &[]);
        }
        reply(self.changed(debited, &[&request.team_id]).await)
    }

    async fn refund_credits(&self, request: Request<RefundCreditsRequest>) -> Reply<CreditEntry> {
        let request = request.into_inner();
        let refunded = self.store.refund(&request.debit_entry_id, &request.team_id, &request.reason).await;
        reply(self.changed(refunded, &[&request.team_id]).await)
    }

    async fn grant_credits(&self, request: Request<GrantCreditsRequest>) -> Reply<CreditEntry> {
        let request = request.into_inner();
        let granted = self.store.grant(&request.team_id, request.amount, &request.reason).await;
        reply(self.changed(granted, &[&request.team_id]).await)
    }

    async fn transfer_credits(&self, request: Request<TransferCreditsRequest>) -> Reply<TransferCreditsResponse> {
        let request = request.into_inner();
        let moved =
            self.store.transfer(&request.from_team_id, &request.to_team_id, request.amount, &request.reason).await;
        reply(self.changed(moved, &[&request.from_team_id, &request.to_team_id]).await)
    }

    async fn get_usage(&self, request: Request<UsageRequest>) -> Reply<UsageResponse> {
        let request = request.into_inner();
        let days = self.store.usage(&request.team_id, request.from_ms, request.to_ms).await?;
        reply(Ok(UsageResponse { days }))
    }
}

/// `switchboard.credits.debited`: credits taken from teams (searches, calls), all teams together.
fn credits_debited() -> &'static switchboard_kit::metrics::Counter<u64> {
    static COUNTER: std::sync::OnceLock<switchboard_kit::metrics::Counter<u64>> = std::sync::OnceLock::new();
    COUNTER.get_or_init(|| {
        switchboard_kit::metrics::meter()
            .u64_counter("switchboard.credits.debited")
            .with_description("Credits debited from teams (knowledge-base searches, call costs).")
            .with_unit("{credit}")
            .build()
    })
}
