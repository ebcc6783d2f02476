//! The `switchboard admin` commands an operator runs: teams, keys and credits managed from the
//! shell, each answering JSON that scripts can read.

use crate::common::Stack;

#[tokio::test]
async fn admin_commands_manage_teams_keys_and_credits_as_json() {
    let stack = Stack::start().await;
    let agency = stack.admin(&["create-team", "--name", "Agency", "--agency", "--credits", "50"]).await;
    assert_eq!(agency["ownsAgency"], true);
    assert_eq!(agency["credits"]["balance"], 50);
    let agency_id = agency["id"].as_str().unwrap();

    let client = stack.admin(&["create-team", "--name", "Client", "--parent", agency_id]).await;
    assert_eq!(client["parentTeamId"], agency_id);

    let key = stack.admin(&["create-key", "--team", agency_id, "--name", "ci", "--read-only"]).await;
    let secret = key["key"].as_str().unwrap();
    assert!(secret.starts_with("ew_") && secret.len() >= 30);
    assert_eq!(key["access"], "read_only");

    let listed = stack.admin(&["list-keys", "--team", agency_id]).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(!listed.to_string().contains(secret), "listing must not reveal the key");
    assert_eq!(listed[0]["prefix"], key["prefix"]);

    let revoked = stack.admin(&["revoke-key", key["id"].as_str().unwrap()]).await;
    assert!(revoked["revokedAt"].is_string());
    let granted = stack.admin(&["grant-credits", "--team", agency_id, "25"]).await;
    assert_eq!(granted["balance"], 75);
}
