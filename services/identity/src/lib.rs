//! The identity service: teams and their agency tree, people and their roles
//! (`switchboard_api::role::Role`), sessions, second factors (TOTP, passkeys), single sign-on,
//! API keys, the credits ledger and subscriptions. It owns its database (`store/`) and is
//! reached over gRPC only (`grpc/`: `IdentityService` and `AccountService`).

pub mod allowances;
pub mod domain_proof;
pub mod grpc;
pub mod keys;
pub mod mail;
pub mod passkeys;
pub mod passwords;
pub mod profile;
mod reauthentication;
pub mod sealing;
pub mod second_factor;
pub mod settings;
pub mod sso;
pub mod sso_http;
pub mod store;
mod validate;

pub use grpc::identity::routes;
pub use settings::AccountSettings;
pub use store::IdentityStore;

pub static MIGRATIONS: switchboard_kit::db::Migrations =
    switchboard_kit::db::Migrations { sqlite: &SQLITE_MIGRATIONS, postgres: &POSTGRES_MIGRATIONS };

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");
