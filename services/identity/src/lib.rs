//! The identity service: teams and their agency tree, users, API keys, the credits ledger
//! and subscriptions. It owns its database and is reached over gRPC only.

pub mod accounts;
pub mod allowances;
pub mod keys;
pub mod mail;
pub mod passkeys;
pub mod passwords;
pub mod second_factor;
pub mod service;
pub mod settings;
pub mod sso;
pub mod store;
mod validate;

pub use service::routes;
pub use settings::AccountSettings;
pub use store::IdentityStore;

pub static MIGRATIONS: switchboard_kit::db::Migrations =
    switchboard_kit::db::Migrations { sqlite: &SQLITE_MIGRATIONS, postgres: &POSTGRES_MIGRATIONS };

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");
