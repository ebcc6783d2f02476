//! Two knowledgebase replicas on one PostgreSQL database and one Qdrant server, each behind a
//! gateway of its own: what one is told, the other answers, and a job runs once. Runs when the
//! test run names a Qdrant server (`SWITCHBOARD_TEST_KNOWLEDGE_ON_QDRANT`, set by scripts/test):
//! the embedded index belongs to one process and cannot be shared.

use serde_json::json;

use crate::agents::id;
use crate::common::{Api, Stack};
use crate::knowledgebase::create_knowledgebase;
use crate::sources::{ENV, SHIPPING, Site, add_webpage, search, settle, texts};

#[tokio::test]
async fn two_knowledgebase_replicas_share_writes_and_run_each_job_once() {
    if std::env::var("SWITCHBOARD_TEST_KNOWLEDGE_ON_QDRANT").is_err() {
        eprintln!("not run: needs SWITCHBOARD_TEST_KNOWLEDGE_ON_QDRANT (scripts/test starts a Qdrant server)");
        return;
    }
    let stack = Stack::start_with(ENV).await;
    assert!(!stack.is_dev(), "the Qdrant stack is one of serve processes");
    let (_replica, replica_url) = stack.start_replica("knowledgebase").await;
    let (_gateway, second_base) = stack.start_gateway(&[("SWITCHBOARD_KNOWLEDGEBASE_URL", &replica_url)]).await;
    let team = stack.team("Replicated", false, 100).await;
    let (first, second) = (stack.client(&team.key), Api::new(&second_base, Some(&team.key)));

    let base = format!("/knowledgebase/{}", id(&create_knowledgebase(&first, "Support").await));
    let through_first = first
        .post(
            &format!("{base}/references"),
            json!({ "question": "Can I bring my dog?", "answer": "Dogs on a lead are welcome in the shop." }),
        )
        .await;
    through_first.expect(201);
    let hits = search(&second, &base, "are pets allowed inside", "&limit=1").await;
    assert_eq!(hits[0]["question"], "Can I bring my dog?", "{hits:?}");

    let through_second = second
        .post(
            &format!("{base}/references"),
            json!({ "question": "Do you repair bikes?", "answer": "Our workshop fixes any bicycle within a day." }),
        )
        .await;
    through_second.expect(201);
    let hits = search(&first, &base, "someone to mend my bicycle", "&limit=1").await;
    assert_eq!(hits[0]["question"], "Do you repair bikes?", "{hits:?}");

    // Both replicas poll the jobs table; the page is fetched by one of them, once.
    let site = Site::start().await;
    let page = add_webpage(&second, &base, "FAQ", &site.url("/faq")).await;
    let settled = settle(&first, &format!("{base}/webpages/{}", id(&page))).await;
    assert_eq!(settled["status"], "ready", "{settled}");
    assert!(texts(settled["content"].as_array().unwrap()).contains(SHIPPING));
    let hits = search(&first, &base, "Which days does the Tromsø warehouse send out parcels?", "&limit=1").await;
    assert_eq!(hits[0]["source"]["id"], page["id"]);
    assert_eq!(site.hits("/faq"), 1, "the scrape job ran once");
}
