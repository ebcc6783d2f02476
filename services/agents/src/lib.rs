//! The agents service: agents, their instructions with a version history, and the
//! runtime prompt that the prompt-optimisation job builds after every change.

pub mod prompt;
pub mod service;
pub mod settings;
pub mod store;
pub mod try_it;
pub mod watch;

pub use service::routes;
pub use store::AgentStore;

pub static MIGRATIONS: switchboard_kit::db::Migrations =
    switchboard_kit::db::Migrations { sqlite: &SQLITE_MIGRATIONS, postgres: &POSTGRES_MIGRATIONS };

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

#[cfg(test)]
mod tests {
    #[test]
    fn the_jobs_table_is_kits() {
        assert_eq!(switchboard_kit::jobs::check_migrations(&super::MIGRATIONS), Ok(()));
    }
}
