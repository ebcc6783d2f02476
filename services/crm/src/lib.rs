//! The CRM service: contacts with notes, assigned users, tags and custom field values, and
//! kanban boards whose columns are stages.

pub mod service;
pub mod store;

pub use store::CrmStore;

pub static MIGRATIONS: switchboard_kit::db::Migrations =
    switchboard_kit::db::Migrations { sqlite: &SQLITE_MIGRATIONS, postgres: &POSTGRES_MIGRATIONS };

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");
