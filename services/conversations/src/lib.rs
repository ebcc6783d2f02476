//! The conversations service: calls (with their transcript, timeline and recording) and chats
//! (with their messages), as voice and chat runtimes record them through the ingestion API and
//! as the gateway reads them.

pub mod analysis;
pub mod service;
pub mod store;

pub use store::ConversationStore;

pub static MIGRATIONS: switchboard_kit::db::Migrations =
    switchboard_kit::db::Migrations { sqlite: &SQLITE_MIGRATIONS, postgres: &POSTGRES_MIGRATIONS };

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");
