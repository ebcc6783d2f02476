//! The platform's words: webhook event types, audit actions, and the statuses of knowledge
//! sources, jobs and webhook deliveries. Each is an enum with one spelling per variant, used
//! by every service that records it, by the public contract (`switchboard_api` re-exports
//! them: it depends on this crate, so they cannot live there) and, through the OpenAPI
//! document's enum schemas, by the portal.
//!
//! Stored as their text; a store parses it at its edge. The columns that hold them carry a
//! CHECK constraint listing the same values, and each service's tests compare the two.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Declares a vocabulary: the enum, `ALL`, `as_str`, `parse`, `label` (its doc comment), and
/// serde and schemars impls that spell it as text. The schema is a string `enum` with the
/// labels in `x-enum-descriptions` (the OpenAPI generators' extension), so that a client can
/// show a value in words without a copy of the list.
macro_rules! vocabulary {
    (
        $(#[doc = $summary:literal])*
        $name:ident, schema $schema:literal {
            $( #[doc = $label:literal] $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[doc = $summary])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( #[doc = $label] $variant, )+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];
            const NAMES: &'static [&'static str] = &[$($text,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }

            /// The value of this spelling; `None` for any other text.
            pub fn parse(text: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|value| value.as_str() == text)
            }

            /// What the value means, in a few words.
            pub fn label(self) -> &'static str {
                match self {
                    $( $name::$variant => $label.trim(), )+
                }
            }

            /// The spellings, for messages: "a, b, c".
            pub fn names() -> String {
                Self::NAMES.join(", ")
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = Cow::<'de, str>::deserialize(deserializer)?;
                $name::parse(&text).ok_or_else(|| serde::de::Error::unknown_variant(&text, Self::NAMES))
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed($schema)
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                let summary: &[&str] = &[$($summary),*];
                let summary: Vec<&str> = summary.iter().map(|line| line.trim()).collect();
                let labels: Vec<&str> = Self::ALL.iter().map(|value| value.label()).collect();
                json_schema!({
                    "description": summary.join(" "),
                    "type": "string",
                    "enum": Self::NAMES,
                    "x-enum-descriptions": labels,
                })
            }
        }
    };
}

vocabulary! {
    /// A webhook event type: what an endpoint subscribes to, and the `type` of what it
    /// receives (`webhook.test`, sent on request only, is not one).
    EventType, schema "EventName" {
        /// A call ended
        CallEnded = "call.ended",
        /// A chat ended
        ChatEnded = "chat.ended",
        /// A contact was created
        ContactCreated = "contact.created",
        /// A contact was changed
        ContactUpdated = "contact.updated",
        /// A contact was deleted
        ContactDeleted = "contact.deleted",
        /// A knowledge web page is ready
        WebpageReady = "webpage.ready",
        /// A knowledge web page failed
        WebpageFailed = "webpage.failed",
        /// A knowledge document is ready
        DocumentReady = "document.ready",
        /// A knowledge document failed
        DocumentFailed = "document.failed",
        /// An agent's instructions changed
        AgentInstructionsUpdated = "agent.instructions.updated",
        /// A subteam was created
        SubteamCreated = "subteam.created",
        /// The credit balance fell under the threshold
        CreditsLow = "credits.low",
    }
}

vocabulary! {
    /// What an entry of the audit log records.
    AuditAction, schema "AuditAction" {
        /// A person changed their name
        UserNameChanged = "user.name_changed",
        /// A person asked to change their e-mail address
        UserEmailChangeRequested = "user.email_change_requested",
        /// A change of e-mail address was refused
        UserEmailChangeFailed = "user.email_change_failed",
        /// A person's e-mail address changed
        UserEmailChanged = "user.email_changed",
        /// Signed in with a password
        AuthSignedIn = "auth.signed_in",
        /// A sign-in was refused
        AuthSignInFailed = "auth.sign_in_failed",
        /// Signed out
        AuthSignedOut = "auth.signed_out",
        /// Signed up, creating a team
        AuthSignedUp = "auth.signed_up",
        /// Changed their password
        AuthPasswordChanged = "auth.password_changed",
        /// A password change was refused
        AuthPasswordChangeFailed = "auth.password_change_failed",
        /// Ended one of their sessions
        AuthSessionEnded = "auth.session_ended",
        /// Signed out everywhere else
        AuthSignedOutElsewhere = "auth.signed_out_elsewhere",
        /// A password reset was requested
        AuthPasswordResetRequested = "auth.password_reset_requested",
        /// Reset their password
        AuthPasswordReset = "auth.password_reset",
        /// Set up a second factor
        AuthSecondFactorEnabled = "auth.second_factor_enabled",
        /// Removed their second factor
        AuthSecondFactorRemoved = "auth.second_factor_removed",
        /// A second-factor code was refused
        AuthSecondFactorFailed = "auth.second_factor_failed",
        /// Used a recovery code
        AuthRecoveryCodeUsed = "auth.recovery_code_used",
        /// Renewed their recovery codes
        AuthRecoveryCodesRenewed = "auth.recovery_codes_renewed",
        /// Signed in through single sign-on
        AuthSignedInSso = "auth.signed_in_sso",
        /// Linked their account to single sign-on
        AuthSsoLinked = "auth.sso_linked",
        /// Added a passkey
        AuthPasskeyAdded = "auth.passkey_added",
        /// Removed a passkey
        AuthPasskeyRemoved = "auth.passkey_removed",
        /// Signed in with a passkey
        AuthSignedInPasskey = "auth.signed_in_passkey",
        /// Proved it was them again
        AuthReauthenticated = "auth.reauthenticated",
        /// A re-authentication was refused
        AuthReauthenticationFailed = "auth.reauthentication_failed",
        /// Created an API key
        ApiKeyCreated = "api_key.created",
        /// Revoked an API key
        ApiKeyRevoked = "api_key.revoked",
        /// Invited a member
        MemberInvited = "member.invited",
        /// Revoked an invitation
        MemberInvitationRevoked = "member.invitation_revoked",
        /// A member joined
        MemberJoined = "member.joined",
        /// Changed a member's role
        MemberRoleChanged = "member.role_changed",
        /// Removed a member
        MemberRemoved = "member.removed",
        /// Created a subteam
        SubteamCreated = "subteam.created",
        /// Changed a subteam
        SubteamUpdated = "subteam.updated",
        /// Deleted a subteam
        SubteamDeleted = "subteam.deleted",
        /// Added credits to a subteam
        SubteamCreditsAdded = "subteam.credits_added",
        /// Created a webhook
        WebhookCreated = "webhook.created",
        /// Deleted a webhook
        WebhookDeleted = "webhook.deleted",
        /// Replaced an agent's instructions
        InstructionsReplaced = "instructions.replaced",
        /// Restored an earlier version of an agent's instructions
        InstructionsRestored = "instructions.restored",
        /// Changed the team's sign-in requirements
        TeamSecurityChanged = "team.security_changed",
        /// Changed the team's single sign-on
        TeamSsoChanged = "team.sso_changed",
        /// Proved an e-mail domain for single sign-on
        TeamSsoDomainVerified = "team.sso_domain_verified",
        /// Removed the team's single sign-on
        TeamSsoRemoved = "team.sso_removed",
        /// Created an agent
        AgentCreated = "agent.created",
        /// Changed an agent's settings
        AgentUpdated = "agent.updated",
        /// Deleted an agent
        AgentDeleted = "agent.deleted",
        /// Created a knowledge base
        KnowledgebaseCreated = "knowledgebase.created",
        /// Changed a knowledge base
        KnowledgebaseUpdated = "knowledgebase.updated",
        /// Deleted a knowledge base
        KnowledgebaseDeleted = "knowledgebase.deleted",
        /// Added a webpage to a knowledge base
        WebpageCreated = "webpage.created",
        /// Changed a webpage's settings
        WebpageUpdated = "webpage.updated",
        /// Removed a webpage
        WebpageDeleted = "webpage.deleted",
        /// Asked for a webpage to be scraped again
        WebpageRefreshed = "webpage.refreshed",
        /// Uploaded a document
        DocumentUploaded = "document.uploaded",
        /// Changed a document
        DocumentUpdated = "document.updated",
        /// Deleted a document
        DocumentDeleted = "document.deleted",
        /// Added a Q&A reference
        ReferenceCreated = "reference.created",
        /// Added Q&A references in bulk
        ReferencesImported = "reference.imported",
        /// Changed a Q&A reference
        ReferenceUpdated = "reference.updated",
        /// Deleted a Q&A reference
        ReferenceDeleted = "reference.deleted",
        /// Changed a call (its favourite mark)
        CallUpdated = "call.updated",
        /// Deleted a call
        CallDeleted = "call.deleted",
        /// Deleted a chat
        ChatDeleted = "chat.deleted",
        /// Created a contact
        ContactCreated = "contact.created",
        /// Imported contacts in bulk
        ContactsImported = "contact.imported",
        /// Changed a contact
        ContactUpdated = "contact.updated",
        /// Deleted a contact
        ContactDeleted = "contact.deleted",
        /// Changed who a contact is assigned to
        ContactAssignmentsChanged = "contact.assignments_changed",
        /// Changed a contact's boards
        ContactBoardsChanged = "contact.boards_changed",
        /// Added a note to a contact
        ContactNoteAdded = "contact.note_added",
        /// Deleted a note of a contact
        ContactNoteDeleted = "contact.note_deleted",
        /// Created a custom contact field
        CustomFieldCreated = "custom_field.created",
        /// Changed a custom contact field
        CustomFieldUpdated = "custom_field.updated",
        /// Deleted a custom contact field
        CustomFieldDeleted = "custom_field.deleted",
        /// Created a board
        BoardCreated = "board.created",
        /// Changed a board or its stages
        BoardUpdated = "board.updated",
        /// Deleted a board
        BoardDeleted = "board.deleted",
        /// Created a tag
        TagCreated = "tag.created",
        /// Changed a tag
        TagUpdated = "tag.updated",
        /// Deleted a tag
        TagDeleted = "tag.deleted",
        /// Changed a webhook (pausing or resuming it included)
        WebhookUpdated = "webhook.updated",
        /// Sent a webhook's delivery again
        WebhookDeliveryRetried = "webhook.delivery_retried",
        /// Sent a test event to a webhook
        WebhookTested = "webhook.tested",
        /// Changed the low-credit alert
        CreditsAlertChanged = "credits.alert_changed",
    }
}

vocabulary! {
    /// Where a webpage or document is in its processing. Documents are never `refreshing`.
    SourceStatus, schema "SourceStatus" {
        /// Added; its first scrape or extraction has not finished
        Pending = "pending",
        /// A refresh of a ready or failed page is under way; its entries stay searchable
        Refreshing = "refreshing",
        /// Its entries are stored and searchable
        Ready = "ready",
        /// Its last scrape or extraction failed; `failureReason` says why
        Failed = "failed",
    }
}

impl SourceStatus {
    /// Whether its content is being (re)built: `isUpdating`, and no refresh is accepted.
    pub fn is_updating(self) -> bool {
        matches!(self, SourceStatus::Pending | SourceStatus::Refreshing)
    }

    /// The status of stored text; text this version does not know reads as failed, so that it
    /// is shown and can be refreshed rather than hidden.
    pub fn of_stored(text: &str) -> SourceStatus {
        SourceStatus::parse(text).unwrap_or(SourceStatus::Failed)
    }
}

vocabulary! {
    /// The state of a background job (an agent's prompt optimisation, a scrape, an extraction).
    JobStatus, schema "JobStatus" {
        /// Waiting for a worker
        Queued = "queued",
        /// A worker holds it
        Running = "running",
        /// Done
        Completed = "completed",
        /// Given up after its last attempt
        Failed = "failed",
    }
}

vocabulary! {
    /// The state of one event's delivery to one webhook.
    DeliveryStatus, schema "DeliveryStatus" {
        /// Waiting for its next attempt.
        Pending = "pending",
        /// Waiting for its webhook to be enabled again; then it is pending.
        Held = "held",
        /// The receiver answered 2xx.
        Delivered = "delivered",
        /// Given up after 24 hours of retries, or not held because its disabled webhook already held 1,000 deliveries.
        Failed = "failed",
    }
}

impl DeliveryStatus {
    /// The values a `deliveries.status` column holds: a held delivery is stored as pending
    /// (enabling its webhook then rewrites no rows).
    pub const STORED: [DeliveryStatus; 3] =
        [DeliveryStatus::Pending, DeliveryStatus::Delivered, DeliveryStatus::Failed];
}

/// The values a migration's `CHECK (column IN ('a', 'b'))` allows for `column`, in order; every
/// such constraint on the column in `sql`, so that a test can compare them with a vocabulary.
pub fn checked_values(sql: &str, column: &str) -> Vec<Vec<String>> {
    listed_values(sql, &format!("CHECK ({column} IN ("))
}

/// The quoted values of every list in `sql` that follows `needle` (which ends with its
/// opening parenthesis), e.g. a SQLite trigger's `NEW.action IN (`.
pub fn listed_values(sql: &str, needle: &str) -> Vec<Vec<String>> {
    sql.match_indices(needle)
        .filter_map(|(at, _)| {
            let list = &sql[at + needle.len()..];
            let end = list.find(')')?;
            Some(list[..end].split(',').map(|value| value.trim().trim_matches('\'').to_owned()).collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T>(all: &[T])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + Serialize + for<'de> Deserialize<'de>,
    {
        for value in all {
            let text = value.to_string();
            let json = serde_json::to_string(value).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), *value);
        }
    }

    #[test]
    fn every_value_reads_back_from_its_spelling() {
        for value in EventType::ALL {
            assert_eq!(EventType::parse(value.as_str()), Some(*value));
        }
        for value in AuditAction::ALL {
            assert_eq!(AuditAction::parse(value.as_str()), Some(*value));
        }
        for value in SourceStatus::ALL {
            assert_eq!(SourceStatus::parse(value.as_str()), Some(*value));
        }
        for value in JobStatus::ALL {
            assert_eq!(JobStatus::parse(value.as_str()), Some(*value));
        }
        for value in DeliveryStatus::ALL {
            assert_eq!(DeliveryStatus::parse(value.as_str()), Some(*value));
        }
        round_trips(EventType::ALL);
        round_trips(AuditAction::ALL);
        round_trips(SourceStatus::ALL);
        round_trips(JobStatus::ALL);
        round_trips(DeliveryStatus::ALL);
        assert_eq!(EventType::ALL.len(), 12);
        assert_eq!(EventType::parse("webhook.test"), None);
    }

    #[test]
    fn other_text_is_refused_with_the_list() {
        assert_eq!(JobStatus::parse("Queued"), None);
        let error = serde_json::from_str::<JobStatus>("\"done\"").unwrap_err().to_string();
        assert!(error.contains("`queued`, `running`, `completed`, `failed`"), "{error}");
    }

    #[test]
    fn the_schema_lists_every_spelling_with_its_label() {
        let schema = schemars::schema_for!(EventType);
        let json = serde_json::to_value(&schema).unwrap();
        let names: Vec<&str> = EventType::ALL.iter().map(|event| event.as_str()).collect();
        assert_eq!(json["enum"], serde_json::json!(names));
        assert_eq!(json["x-enum-descriptions"][0], "A call ended");
        assert_eq!(DeliveryStatus::Failed.label().lines().count(), 1);
    }

    fn names<T: Copy + fmt::Display>(all: &[T]) -> Vec<String> {
        all.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_jobs_table_allows_exactly_the_job_statuses() {
        // Every service's jobs table is jobs.sql's (`jobs::check_table`).
        assert_eq!(checked_values(include_str!("jobs.sql"), "status"), vec![names(JobStatus::ALL)]);
    }

    #[test]
    fn checked_values_reads_every_constraint_on_the_column() {
        let sql = "status TEXT NOT NULL CHECK (status IN ('a', 'b')),\n x TEXT CHECK (status IN ('c'))";
        assert_eq!(checked_values(sql, "status"), vec![vec!["a", "b"], vec!["c"]]);
        assert!(checked_values(sql, "kind").is_empty());
    }
}
