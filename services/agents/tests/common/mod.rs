//! What the agents store tests share: a fresh store per engine.

use std::future::Future;

use switchboard_agents::AgentStore;
use switchboard_kit::testdb;

/// Runs `test` on a fresh store on SQLite, then on PostgreSQL when `TEST_DATABASE_URL` is set.
pub async fn on_every_engine<F, Fut>(test: F)
where
    F: Fn(AgentStore) -> Fut,
    Fut: Future<Output = ()>,
{
    for database in testdb::all().await.expect("test databases") {
        let store = AgentStore::open(&database.url).await.expect("open the store");
        eprintln!("engine: {:?}", database.engine);
        test(store.clone()).await;
        store.db().close().await;
    }
}

pub fn team() -> String {
    uuid::Uuid::new_v4().to_string()
}
