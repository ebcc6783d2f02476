//! `switchboard admin ...`: operator commands against the identity database, printing JSON.
//! They work with the platform running or stopped (SQLite in WAL mode, or PostgreSQL).

use std::path::Path;

use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value, json};
use switchboard_identity::IdentityStore;
use switchboard_identity::store::NewTeam;
use switchboard_kit::grpc::ServiceAccess;
use switchboard_kit::team_versions::{TeamVersions, announce};
use switchboard_kit::time::iso_ms;
use switchboard_proto::v1::{ApiKey, KeyAccess, NewUser, Team};

use crate::config::{self, FileConfig};

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Create a team.
    CreateTeam {
        #[arg(long)]
        name: String,
        /// The team owns an agency and may act on client subteams.
        #[arg(long)]
        agency: bool,
        /// Make it a client subteam of this agency team.
        #[arg(long)]
        parent: Option<String>,
        /// Credits granted at creation.
        #[arg(long, default_value_t = 0)]
        credits: i64,
        #[arg(long)]
        plan: Option<String>,
    },
    /// Create an API key; the key is printed once.
    CreateKey {
        #[arg(long)]
        team: String,
        #[arg(long, default_value = "API key")]
        name: String,
        #[arg(long)]
        read_only: bool,
    },
    /// List a team's keys (never their secrets).
    ListKeys {
        #[arg(long)]
        team: String,
    },
    /// Revoke a key; it stops working within seconds.
    RevokeKey { id: String },
    /// Add credits to a team's balance.
    GrantCredits {
        #[arg(long)]
        team: String,
        amount: i64,
    },
    /// Add a user to a team.
    CreateUser {
        #[arg(long)]
        team: String,
        #[arg(long)]
        first_name: String,
        #[arg(long)]
        last_name: String,
        #[arg(long)]
        email: String,
        /// owner, admin or member.
        #[arg(long, default_value = "member")]
        role: String,
    },
    /// Print a single-use link (valid 7 days) that lets someone into a team's portal: the way in
    /// for the first owner of a self-hosted install.
    Invite {
        #[arg(long)]
        team: String,
        #[arg(long)]
        email: String,
        /// owner, admin, member or viewer.
        #[arg(long, default_value = "owner")]
        role: String,
        /// Where the portal is reached (default: SWITCHBOARD_PUBLIC_URL, else the running
        /// `switchboard dev`'s address, else http://127.0.0.1:8080).
        #[arg(long)]
        base_url: Option<String>,
    },
    /// Print a password-reset link (valid 1 day) for the user with this e-mail.
    ResetLink {
        #[arg(long)]
        email: String,
        #[arg(long)]
        base_url: Option<String>,
    },
    /// Rebuild the vector index from SQL. With --url, asks the running knowledgebase
    /// service; otherwise works on the data directory (the platform must be stopped).
    Reindex {
        /// gRPC URL of a running knowledgebase service.
        #[arg(long)]
        url: Option<String>,
    },
    /// Delete a team (soft: its ledger stays; its keys meet "Team not found").
    DeleteTeam { id: String },
    /// Fill a team with realistic calls (transcripts, timelines, recordings) and chats through
    /// the conversations ingestion API of a running platform, and with CRM contacts (tags, a
    /// board with stages, notes) through the CRM service: the `switchboard dev` of the data
    /// directory, or --url/--crm-url with SWITCHBOARD_SERVICE_TOKEN. Prints what it wrote and
    /// how fast.
    SeedDemo {
        #[arg(long)]
        team: String,
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
        calls: u32,
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
        chats: u32,
        /// Transcript segments per call (default: each scenario's own, 6 to 11).
        #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100_000))]
        segments: Option<u32>,
        /// Another seed writes other conversations (external ids `demo-<seed>-call-<n>`).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How many of the calls get a recording (a WAV tone as long as the call; these calls are
        /// all answered and ended).
        #[arg(long, default_value_t = 5)]
        recordings: u32,
        /// The size of each recording in KiB (at most 200 MiB); it still lasts as long as its
        /// call, at the sample rate that takes. Default: 8 kHz, about 16 KB a second of call.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=204_800))]
        recording_kb: Option<u64>,
        /// Conversations written at once.
        #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
        concurrency: u32,
        /// Transcript segments per append (a live runtime sends a few at a time).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
        append_batch: u32,
        /// gRPC URL of the conversations service (default: SWITCHBOARD_CONVERSATIONS_URL, else the
        /// running `switchboard dev` of the data directory).
        #[arg(long)]
        url: Option<String>,
        /// CRM contacts (the same numbers for the same seed: a second run adds none).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
        contacts: u32,
        /// gRPC URL of the CRM service (default: SWITCHBOARD_CRM_URL, else the running
        /// `switchboard dev` of the data directory).
        #[arg(long)]
        crm_url: Option<String>,
        /// Also one call and one long chat whose every text holds HTML and script
        /// (`<img src=x onerror=...>`, `<script>`): what the portal must show as text.
        #[arg(long)]
        hostile: bool,
    },
}

fn team_json(team: &Team) -> Value {
    json!({
        "id": team.id,
        "name": team.name,
        "createdAt": iso_ms(team.created_at_ms),
        "ownsAgency": team.owns_agency,
        "parentTeamId": team.parent_team_id,
    })
}

fn key_json(key: &ApiKey) -> Value {
    json!({
        "id": key.id,
        "teamId": key.team_id,
        "name": key.name,
        "prefix": key.prefix,
        "access": if key.access() == KeyAccess::ReadOnly { "read_only" } else { "full" },
        "createdAt": iso_ms(key.created_at_ms),
        "lastUsedAt": key.last_used_at_ms.map(iso_ms),
        "revokedAt": key.revoked_at_ms.map(iso_ms),
    })
}

pub async fn run(
    file: &FileConfig,
    data_dir: Option<&Path>,
    database_url: Option<String>,
    command: AdminCommand,
) -> anyhow::Result<()> {
    if let AdminCommand::Reindex { url } = command {
        return reindex(file, data_dir, url).await;
    }
    if let AdminCommand::SeedDemo {
        team,
        calls,
        chats,
        segments,
        seed,
        recordings,
        recording_kb,
        concurrency,
        append_batch,
        url,
        contacts,
        crm_url,
        hostile,
    } = command
    {
        let plan = crate::seed::Plan {
            team,
            calls,
            chats,
            segments,
            seed,
            recordings,
            recording_kb,
            contacts,
            concurrency: concurrency as usize,
            append_batch: append_batch as usize,
            hostile,
        };
        let crm = (contacts > 0).then_some((crm_url, contacts));
        return seed_demo(file, data_dir, url, &plan, crm).await;
    }
    // The Redis to announce changes in: the configured one, else the one of a `dev` running on
    // the data directory.
    let (mut redis_url, redis_timeout) = config::redis(file)?;
    if redis_url.is_none() && database_url.is_none() {
        let dir = data_dir.map_or_else(|| config::data_dir(file, None), Path::to_path_buf);
        redis_url = crate::session::DevSession::read(&dir)?.and_then(|session| session.redis_url);
    }
    let versions = redis_url.map(|url| crate::components::team_versions_at(&url, redis_timeout)).transpose()?;
    let url = match (database_url, data_dir) {
        (Some(url), _) => url,
        (None, Some(dir)) => {
            std::fs::create_dir_all(dir)?;
            switchboard_kit::db::sqlite_url(&dir.join("identity.db"))
        }
        (None, None) => {
            let identity = &switchboard_kit::peers::IDENTITY;
            config::database_url(file.section(identity).database_url, &config::data_dir(file, None), identity.name)?
        }
    };
    let portal = portal_base(&command, data_dir.map_or_else(|| config::data_dir(file, None), Path::to_path_buf))?;
    let period = switchboard_identity::AccountSettings::from_env()?.billing_period_ms;
    let store = IdentityStore::open(&url).await?.with_billing_period(period);
    let output = execute(&store, versions.as_ref(), command, &portal).await;
    store.db().close().await;
    println!("{}", serde_json::to_string_pretty(&output?)?);
    Ok(())
}

/// Runs an identity command; changes to what `GET /me` shows give the team a new version, so
/// that gateways sharing `versions`' Redis read it again (without one, they show the change
/// within their cache lifetime).
async fn execute(
    store: &IdentityStore,
    versions: Option<&TeamVersions>,
    command: AdminCommand,
    portal: &str,
) -> anyhow::Result<Value> {
    let settings = switchboard_identity::AccountSettings::from_env()?;
    Ok(match command {
        AdminCommand::CreateTeam { name, agency, parent, credits, plan } => {
            let team = store
                .create_team(NewTeam {
                    name,
                    owns_agency: agency,
                    parent_team_id: parent,
                    initial_credits: credits,
                    access: None,
                    plan,
                })
                .await?;
            let mut view = team_json(&team);
            view["credits"] = json!({ "balance": store.balance(&team.id).await? });
            view
        }
        AdminCommand::CreateKey { team, name, read_only } => {
            let access = if read_only { KeyAccess::ReadOnly } else { KeyAccess::Full };
            let created = store.create_key(&team, &name, access).await?;
            let mut view = key_json(&created.key.unwrap_or_default());
            view["key"] = Value::from(created.secret);
            view
        }
        AdminCommand::ListKeys { team } => {
            Value::from(store.list_keys(&team).await?.iter().map(key_json).collect::<Vec<_>>())
        }
        AdminCommand::RevokeKey { id } => {
            let key = store.revoke_key(&id, None).await?;
            announce(versions, &[&key.team_id]).await;
            key_json(&key)
        }
        AdminCommand::GrantCredits { team, amount } => {
            let entry = store.grant(&team, amount, "granted by an operator").await?;
            announce(versions, &[&team]).await;
            json!({ "teamId": team, "balance": entry.balance_after, "entryId": entry.id })
        }
        AdminCommand::CreateUser { team, first_name, last_name, email, role } => {
            let user = store.create_user(&team, &NewUser { first_name, last_name, email, role }).await?;
            json!({
                "id": user.id,
                "teamId": user.team_id,
                "firstName": user.first_name,
                "lastName": user.last_name,
                "email": user.email,
                "role": user.role,
            })
        }
        AdminCommand::DeleteTeam { id } => {
            let team = store.delete_team(&id).await?;
            announce(versions, &[&id]).await;
            team_json(&team)
        }
        AdminCommand::Invite { team, email, role, .. } => {
            let invitation = store.invite(&team, &email, &role, None, settings.invite_valid_ms).await?;
            let url = switchboard_api::accounts::invite_url(portal, &invitation.token);
            if let Some(mailer) = switchboard_identity::mail::Mailer::from_env()? {
                let team = store.team(&team).await?;
                mailer.send(switchboard_identity::mail::invitation(&invitation.email, &team.name, &url)).await?;
            }
            json!({
                "teamId": invitation.team_id,
                "email": invitation.email,
                "role": invitation.role,
                "url": url,
                "expiresAt": iso_ms(invitation.expires_at_ms),
            })
        }
        AdminCommand::ResetLink { email, .. } => {
            let link = store.reset_link(&email, settings.reset_valid_ms).await?;
            let url = switchboard_api::accounts::reset_url(portal, &link.token);
            if let Some(mailer) = switchboard_identity::mail::Mailer::from_env()? {
                mailer.send(switchboard_identity::mail::reset(&link.email, &url)).await?;
            }
            json!({
                "teamId": link.team_id,
                "email": link.email,
                "url": url,
                "expiresAt": iso_ms(link.expires_at_ms),
            })
        }
        AdminCommand::Reindex { .. } | AdminCommand::SeedDemo { .. } => {
            anyhow::bail!("this command does not use the identity database")
        }
    })
}

/// Where links point: `--base-url`, else SWITCHBOARD_PUBLIC_URL, else the running `switchboard
/// dev` of the data directory, else the default listen address.
fn portal_base(command: &AdminCommand, data_dir: std::path::PathBuf) -> anyhow::Result<String> {
    let given = match command {
        AdminCommand::Invite { base_url, .. } | AdminCommand::ResetLink { base_url, .. } => base_url.clone(),
        _ => return Ok(String::new()),
    };
    let from_env = || std::env::var("SWITCHBOARD_PUBLIC_URL").ok().filter(|url| !url.trim().is_empty());
    let base = match given.or_else(from_env) {
        Some(base) => base,
        None => match crate::session::DevSession::read(&data_dir)? {
            Some(dev) => dev.api_base_url.trim_end_matches('/').trim_end_matches("/v1").to_owned(),
            None => "http://127.0.0.1:8080".to_owned(),
        },
    };
    Ok(base.trim_end_matches('/').to_owned())
}

async fn reindex(file: &FileConfig, data_dir: Option<&Path>, url: Option<String>) -> anyhow::Result<()> {
    let entries = match url {
        Some(url) => {
            use switchboard_proto::v1::ReindexRequest;
            use switchboard_proto::v1::knowledgebase_service_client::KnowledgebaseServiceClient;
            let access = ServiceAccess::from_env()?.unwrap_or(ServiceAccess::Trusted);
            let timeout = std::time::Duration::from_secs(3600);
            let mut client = KnowledgebaseServiceClient::new(switchboard_kit::grpc::channel(&url, &access, timeout)?);
            client
                .reindex(ReindexRequest {})
                .await
                .map_err(|e| anyhow::anyhow!("reindex: {}", e.message()))?
                .into_inner()
                .entries
        }
        None => {
            let data_dir = config::data_dir(file, data_dir);
            let settings = crate::serve::knowledgebase_settings(file, &data_dir)?;
            let knowledge = switchboard_knowledgebase::open(settings).await?;
            let entries = knowledge.sync.rebuild(knowledge.embedder.as_ref()).await?;
            knowledge.store.db().close().await;
            entries
        }
    };
    println!("{}", serde_json::to_string_pretty(&json!({ "reindexed": entries }))?);
    Ok(())
}

/// Where a service is: its flag, then its environment variable, then the session file of a
/// `switchboard dev` running on the data directory.
fn service_url(
    service: &switchboard_kit::peers::ServiceInfo,
    given: Option<String>,
    session: Option<&crate::session::DevSession>,
    data_dir: &Path,
) -> anyhow::Result<String> {
    given
        .or_else(|| std::env::var(service.url_variable()).ok())
        .or_else(|| session.and_then(|s| s.services.get(service.name).cloned()))
        .with_context(|| {
            format!(
                "no running `switchboard dev` on {} and no {} URL: start the platform, or give its URL",
                data_dir.display(),
                service.name
            )
        })
}

/// Conversations through the ingestion API (when any are asked for), then contacts through
/// the CRM service (`crm`: its URL flag and how many).
async fn seed_demo(
    file: &FileConfig,
    data_dir: Option<&Path>,
    url: Option<String>,
    plan: &crate::seed::Plan,
    crm: Option<(Option<String>, u32)>,
) -> anyhow::Result<()> {
    let data_dir = config::data_dir(file, data_dir);
    let session = crate::session::DevSession::read(&data_dir)?;
    let access = match (ServiceAccess::from_env()?, session.as_ref().and_then(|s| s.service_token.clone())) {
        (Some(access), _) => access,
        (None, Some(token)) => ServiceAccess::Token(switchboard_kit::grpc::ServiceToken::new(&token)?),
        (None, None) => ServiceAccess::Trusted,
    };
    let mut written = json!({ "teamId": plan.team });
    if plan.calls > 0 || plan.chats > 0 || plan.hostile {
        let url = service_url(&switchboard_kit::peers::CONVERSATIONS, url, session.as_ref(), &data_dir)?;
        written = crate::seed::run(&url, &access, plan).await?;
    }
    if let Some((crm_url, contacts)) = crm {
        let url = service_url(&switchboard_kit::peers::CRM, crm_url, session.as_ref(), &data_dir)?;
        let channel = switchboard_kit::grpc::channel(&url, &access, std::time::Duration::from_secs(600))?;
        written["crm"] = crate::seed::crm::seed(channel, &plan.team, plan.seed, contacts).await?;
    }
    println!("{}", serde_json::to_string_pretty(&written)?);
    Ok(())
}
