//! The roles a person has in a team, spelled once. The services' messages and the stores carry
//! a role as its name (`Role::as_str`); it is read back with [`Role::parse`] at that edge.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `owner`, `admin`, `member` or `viewer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(rename = "MemberRole")]
pub enum Role {
    /// Everything, including billing-like settings, SSO and removing other owners.
    Owner,
    /// Manages the team's members (except owners), keys and webhooks.
    Admin,
    /// Does the daily work: agents, knowledge, conversations, CRM.
    Member,
    /// Reads.
    Viewer,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Owner, Role::Admin, Role::Member, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
            Role::Viewer => "viewer",
        }
    }

    /// The role of this name; `None` for any other text.
    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.as_str() == name)
    }

    /// The role a stored name gives: one this version does not know grants the least, as a
    /// viewer.
    pub fn of_stored(name: &str) -> Role {
        Role::parse(name).unwrap_or(Role::Viewer)
    }

    /// May manage the team's people and keys.
    pub fn manages(self) -> bool {
        matches!(self, Role::Owner | Role::Admin)
    }

    /// May change data.
    pub fn writes(self) -> bool {
        self != Role::Viewer
    }

    /// The names, for messages: "owner, admin, member, viewer".
    pub fn names() -> String {
        Role::ALL.map(Role::as_str).join(", ")
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_as_their_role_and_others_as_none() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
            assert_eq!(serde_json::to_value(role).unwrap(), role.as_str());
        }
        assert_eq!(Role::parse("Owner"), None, "names are lower-case");
        assert_eq!(Role::of_stored("superuser"), Role::Viewer);
        assert_eq!(Role::names(), "owner, admin, member, viewer");
    }
}
