//! The public API, one module per resource: each declares its endpoints next to their handlers
//! and the types of their requests and answers. The route table is the union of the modules'
//! endpoints.

pub mod agency;
pub mod agent_settings;
pub mod agents;
pub mod analytics;
pub mod api_keys;
pub mod auth;
pub mod boards;
pub mod calls;
pub mod calls_export;
pub mod chats;
pub mod chats_export;
pub mod contacts;
mod csv_export;
pub mod custom_fields;
pub mod identity;
pub mod knowledge;
pub mod members;
pub mod passkeys;
pub mod people;
pub mod profile;
pub mod reauthentication;
pub mod second_factors;
pub mod signed_in;
pub mod sources;
pub mod sso;
pub mod tags;
pub mod test_chat;
pub mod usage;
pub mod webhooks;

use crate::endpoint::Endpoint;

/// OpenAPI tags, in the order the spec lists its endpoint groups.
pub mod groups {
    pub const IDENTITY: &str = "Identity";
    pub const AUTH: &str = "Sign-in";
    pub const MEMBERS: &str = "Members";
    pub const AGENTS: &str = "Agents";
    pub const AGENT_KNOWLEDGEBASE: &str = "Agent knowledgebase";
    pub const KNOWLEDGEBASE: &str = "Knowledgebase";
    pub const CALLS: &str = "Calls";
    pub const CHATS: &str = "Chats";
    pub const CONTACTS: &str = "Contacts";
    pub const BOARDS: &str = "Boards";
    pub const TAGS: &str = "Tags";
    pub const AGENCY: &str = "Agency";
    pub const WEBHOOKS: &str = "Webhooks";
}

/// Failure texts that several groups of operations share.
pub mod failures {
    /// The 401 of the operations that need a person's session.
    pub const NOT_SIGNED_IN: &str = "Not signed in, or the session has ended.";
    /// The 404 of an operation on a team that has been deleted since its key was made.
    pub const TEAM_GONE: &str = "Team not found: the key's team, or the `teamId` subteam, has been deleted.";
}

/// Every public operation.
pub fn endpoints() -> Vec<Endpoint> {
    [
        identity::endpoints(),
        auth::endpoints(),
        profile::endpoints(),
        second_factors::endpoints(),
        passkeys::endpoints(),
        reauthentication::endpoints(),
        sso::endpoints(),
        members::endpoints(),
        api_keys::endpoints(),
        agents::endpoints(),
        test_chat::endpoints(),
        knowledge::endpoints(),
        sources::endpoints(),
        calls::endpoints(),
        calls_export::endpoints(),
        chats_export::endpoints(),
        analytics::endpoints(),
        chats::endpoints(),
        contacts::endpoints(),
        boards::endpoints(),
        tags::endpoints(),
        agency::endpoints(),
        webhooks::endpoints(),
        usage::endpoints(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    use switchboard_api::access::{
        TABLE, UNGOVERNED_OPERATIONS, covers, feature_of_operation, is_ungoverned_operation,
    };

    use super::endpoints;

    /// A new endpoint must be placed in the table of what each `accessConfig` setting governs,
    /// or named as governed by none, with a reason.
    #[test]
    fn every_operation_is_governed_by_a_setting_or_says_why_not() {
        for endpoint in endpoints() {
            let (method, path) = (endpoint.method.as_str(), endpoint.path);
            let governed = feature_of_operation(method, path);
            let ungoverned = is_ungoverned_operation(method, path);
            assert!(
                governed.is_some() != ungoverned,
                "{method} {path}: governed by {governed:?}, listed as ungoverned {ungoverned}"
            );
            assert_eq!(endpoint.feature, governed, "{method} {path}");
        }
    }

    /// Issue 53, finding 0: a person's own account (factors, password, names, address,
    /// sessions) is theirs at every role. Every operation under `/v1/auth/` or `/v1/me` is
    /// either a visitor's (before signing in) or the signed-in person's own, never held to the
    /// team's write rules, which would refuse a viewer; `GET /v1/me` is the team's identity,
    /// which keys read too. Each change to how a person proves who they are needs a recent
    /// sign-in.
    #[test]
    fn a_persons_own_operations_are_theirs_at_every_role() {
        for endpoint in endpoints() {
            let (method, path) = (endpoint.method.as_str(), endpoint.path);
            let personal = path.starts_with("/v1/auth/") || path == "/v1/me" || path.starts_with("/v1/me/");
            if !personal || (method == "GET" && path == "/v1/me") {
                continue;
            }
            assert!(endpoint.visitor || endpoint.own_account, "{method} {path} is held to the team's roles");
            assert!(!endpoint.admins_only, "{method} {path}");
            let changes_factors = path.starts_with("/v1/auth/second-factors/")
                || path.starts_with("/v1/auth/sessions/")
                || path == "/v1/auth/sso/link";
            assert_eq!(endpoint.recent_sign_in, changes_factors && method != "GET", "{method} {path}");
        }
    }

    /// Issue 54: what `/v1/auth/` meant by its prefix (open while a second factor is still to
    /// be set up, no kept answers for `Idempotency-Key`) is each operation's declaration.
    #[test]
    fn the_operations_under_auth_and_only_they_are_the_session_flow() {
        for endpoint in endpoints() {
            let (method, path) = (endpoint.method.as_str(), endpoint.path);
            assert_eq!(endpoint.session_flow, path.starts_with("/v1/auth/"), "{method} {path}");
            if endpoint.session_flow {
                assert!(!endpoint.keeps_idempotent_answers(), "{method} {path}");
            }
        }
    }

    /// Issue 55: every write of a team's data leaves an entry in the team's audit log. A
    /// person's own account and the session flow are audited by the identity service, which
    /// knows their outcome (a refused code, a password that did not match).
    #[test]
    fn every_write_of_the_teams_data_is_audited() {
        for endpoint in endpoints() {
            let (method, path) = (endpoint.method.as_str(), endpoint.path);
            let teams_write = method != "GET"
                && !endpoint.visitor
                && !endpoint.own_account
                && !endpoint.session_flow
                && !endpoint.changes_nothing;
            assert_eq!(endpoint.audit.is_some(), teams_write, "{method} {path}");
        }
    }

    #[test]
    fn every_pattern_of_the_table_matches_a_declared_operation() {
        let declared: Vec<(&str, &str)> = endpoints().iter().map(|e| (e.method.as_str(), e.path)).collect();
        let patterns = TABLE.iter().flat_map(|governs| governs.operations.iter().copied());
        for pattern in patterns.chain(UNGOVERNED_OPERATIONS.iter().map(|(pattern, _)| *pattern)) {
            assert!(
                declared.iter().any(|(method, path)| covers(pattern, method, path)),
                "{pattern} matches no operation"
            );
        }
    }
}
