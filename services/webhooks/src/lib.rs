//! The webhooks service: a team's endpoints, the events the other services publish, and their
//! signed delivery (Standard Webhooks) with retries, in order per resource.

pub mod deliver;
pub mod service;
pub mod settings;
pub mod sign;
pub mod store;

pub use settings::Settings;
pub use store::WebhookStore;

pub static MIGRATIONS: switchboard_kit::db::Migrations =
    switchboard_kit::db::Migrations { sqlite: &SQLITE_MIGRATIONS, postgres: &POSTGRES_MIGRATIONS };

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");
