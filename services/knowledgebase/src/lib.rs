//! The knowledgebase service: knowledge bases, their Q&A entries (manual references and
//! entries extracted from webpages and documents), embeddings, the vector index and search.

pub mod budget;
pub mod charge;
pub mod embed;
pub mod index;
pub mod ingest;
pub mod knowledge;
pub mod lexical;
pub mod objects;
pub mod passages;
pub mod schedule;
pub mod service;
pub mod sources;
mod startup;
pub mod store;
pub mod sync;
mod unlink;

pub use service::routes;
pub use startup::{DEFAULT_MAX_UPLOAD_BYTES, Settings, open, runner};

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
