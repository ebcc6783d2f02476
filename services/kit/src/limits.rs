//! Every bound on what clients send, written once. The gateway's request types take their
//! JSON Schema (and so their validation and the OpenAPI description) from these constants, and
//! the services check the same constants, so an internal gRPC caller meets the same rules.

use crate::FieldViolation;

/// A text length in Unicode characters (what the spec counts, not bytes). A text with a
/// minimum of 1 must also not be blank; no text may hold NUL, which PostgreSQL cannot store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Length {
    pub min: usize,
    pub max: usize,
}

impl Length {
    pub const fn new(min: usize, max: usize) -> Self {
        Self { min, max }
    }

    /// What a violation says, e.g. "must be 1 to 255 characters".
    pub fn message(self) -> String {
        if self.min == 0 {
            format!("must be at most {} characters", self.max)
        } else {
            format!("must be {} to {} characters", self.min, self.max)
        }
    }

    /// The violation of `value`, if any.
    pub fn check(self, field: &str, value: &str) -> Option<FieldViolation> {
        let chars = value.chars().count();
        if chars < self.min || chars > self.max {
            Some(FieldViolation::new(field, self.message()))
        } else if self.min > 0 && value.trim().is_empty() {
            Some(FieldViolation::new(field, "must not be blank"))
        } else if value.contains('\0') {
            Some(FieldViolation::new(field, NUL_MESSAGE))
        } else {
            None
        }
    }
}

pub const NUL_MESSAGE: &str = "must not contain NUL characters";

/// The characters of Unicode's White_Space property, as a regular-expression class body.
macro_rules! white_space {
    () => {
        r"\t\n\u000B\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
    };
}

/// The rules above as JSON Schema patterns (ECMA-262), for the published schemas: no NUL; not
/// blank (a character that is not Unicode White_Space, as `str::trim` counts it); an e-mail as
/// [`is_email`] reads it.
pub const NO_NUL_PATTERN: &str = r"^[^\u0000]*$";
pub const NOT_BLANK_PATTERN: &str = concat!(r"^[^\u0000]*[^\u0000", white_space!(), r"][^\u0000]*$");
pub const EMAIL_PATTERN: &str = concat!(
    r"^[^@\u0000",
    white_space!(),
    r"]+@[^@.\u0000",
    white_space!(),
    r"][^@\u0000",
    white_space!(),
    r"]*\.[^@\u0000",
    white_space!(),
    r"]*[^@.\u0000",
    white_space!(),
    r"]$"
);

/// Deliberately simple: one `@`, a non-empty local part, a dotted domain, no spaces, at most
/// [`EMAIL`] long.
pub fn is_email(value: &str) -> bool {
    let Some((local, domain)) = value.split_once('@') else {
        return false;
    };
    value.chars().count() <= EMAIL.max
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !value.chars().any(char::is_whitespace)
}

/// A whole number in `min..=max`, `default` when not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub min: i64,
    pub max: i64,
    pub default: i64,
}

impl Count {
    pub fn message(self) -> String {
        format!("must be an integer from {} to {}", self.min, self.max)
    }

    pub fn check(self, field: &str, value: i64) -> Option<FieldViolation> {
        (!(self.min..=self.max).contains(&value)).then(|| FieldViolation::new(field, self.message()))
    }
}

/// A number in `min..=max`, `default` when not given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fraction {
    pub min: f64,
    pub max: f64,
    pub default: f64,
}

impl Fraction {
    pub fn message(self) -> String {
        format!("must be a number from {} to {}", self.min, self.max)
    }

    pub fn check(self, field: &str, value: f64) -> Option<FieldViolation> {
        (!value.is_finite() || !(self.min..=self.max).contains(&value))
            .then(|| FieldViolation::new(field, self.message()))
    }
}

/// Names of agents, knowledge bases, documents and webpages.
pub const NAME: Length = Length::new(1, 255);
/// Descriptions of agents and knowledge bases.
pub const DESCRIPTION: Length = Length::new(0, 5000);
/// An agent's instructions (its system prompt).
pub const INSTRUCTIONS: Length = Length::new(1, 100_000);
pub const QUESTION: Length = Length::new(1, 5000);
pub const ANSWER: Length = Length::new(1, 50_000);
/// Notes of documents and webpages, shown to the AI beside them.
pub const NOTES: Length = Length::new(0, 5000);
pub const URL: Length = Length::new(1, 2048);
pub const SEARCH_QUERY: Length = Length::new(1, 2000);
pub const SEARCH_LIMIT: Count = Count { min: 1, max: 50, default: 10 };
/// The least cosine similarity a search result must reach.
pub const SEARCH_THRESHOLD: Fraction = Fraction { min: 0.0, max: 1.0, default: 0.1 };
/// What one search costs.
pub const SEARCH_CREDITS: i64 = 1;
/// A message of the "Try it" chat; the latest is its turn's search query, so as long as one.
pub const TRY_MESSAGE: Length = SEARCH_QUERY;
/// The most messages one "Try it" request carries: 20 of the person's and the 19 replies
/// between them. A longer conversation starts again.
pub const TRY_MESSAGES: usize = 39;
/// The most tokens the chat model may write for one "Try it" reply.
pub const TRY_REPLY_TOKENS: u32 = 512;
/// The most knowledge base entries a "Try it" turn gives the chat model.
pub const TRY_SOURCES: u32 = 4;
/// A subteam's name and its first user's names (the hosted product's rule).
pub const SUBTEAM_NAME: Length = Length::new(1, 50);
pub const PERSON_NAME: Length = Length::new(1, 50);
pub const EMAIL: Length = Length::new(3, 254);
/// Credits a subteam receives each month, drawn from its agency.
pub const MONTHLY_CREDITS: Count = Count { min: 0, max: 1_000_000_000, default: 1000 };
/// An API key's label.
pub const KEY_NAME: Length = Length::new(1, 100);
/// A team's name, as operators create teams.
pub const TEAM_NAME: Length = Length::new(1, 100);
/// A saved version of an agent's instructions.
pub const VERSION: Count = Count { min: 1, max: 2_147_483_647, default: 1 };
/// The id a runtime gives a call, a chat or a chat message.
pub const EXTERNAL_ID: Length = Length::new(1, 255);
/// A call's status as its runtime names it (`ringing`, `completed`, ...).
pub const CALL_STATUS: Length = Length::new(1, 50);
/// One transcript segment or one chat message.
pub const UTTERANCE: Length = Length::new(1, 20_000);
/// The summary of a call or chat.
pub const SUMMARY: Length = Length::new(0, 20_000);
/// The type of a call event (`answered`, `transferred`, ...) and its JSON data.
pub const EVENT_TYPE: Length = Length::new(1, 100);
pub const EVENT_DATA: Length = Length::new(0, 65_536);
/// Items of one append: transcript segments, chat messages.
pub const APPEND_BATCH: Count = Count { min: 1, max: 1000, default: 1 };
/// A `search` of calls or chats.
pub const CONVERSATION_SEARCH: Length = Length::new(1, 200);
/// Messages of a chat read at once.
pub const CHAT_MESSAGES: Count = Count { min: 1, max: 500, default: 100 };
/// Durations in seconds, for filters.
pub const DURATION: Count = Count { min: 0, max: 31_536_000, default: 0 };
/// A recording's size.
pub const RECORDING_BYTES: i64 = 200 * 1024 * 1024;
/// Paged lists: `page` from 1, `limit` 1 to 100 (default 20).
pub const PAGE: Count = Count { min: 1, max: 1_000_000, default: 1 };
pub const PAGE_LIMIT: Count = Count { min: 1, max: 100, default: 20 };

// The CRM.
/// A contact's first and last name, and its carrier.
pub const CONTACT_NAME: Length = Length::new(1, 100);
pub const CARRIER: Length = Length::new(1, 100);
/// A `search` of contacts.
pub const CONTACT_SEARCH: Length = Length::new(1, 200);
/// A note on a contact.
pub const CONTACT_NOTE: Length = Length::new(1, 5000);
/// Contacts of one bulk create.
pub const BULK_CONTACTS: Count = Count { min: 1, max: 1000, default: 1 };
/// References of one bulk create.
pub const BULK_REFERENCES: Count = Count { min: 1, max: 1000, default: 1 };
/// Passages one request may give the encoder (`SWITCHBOARD_EMBED_PASSAGES_PER_REQUEST`, never
/// above the minute's budget): a bulk create of 1,000 answers of up to 128 words each fits.
pub const EMBED_PASSAGES_PER_REQUEST: i64 = 1_000;
/// Passages embedded for one team a minute, every replica together, on every path that embeds
/// for it (`SWITCHBOARD_EMBED_PASSAGES_PER_MINUTE`): about a minute of two cores' encoder at the
/// 89-93 SciFact passages a second of BENCHMARKS.md (issue 43), so that one team alone still
/// imports at the encoder's rate there, and no team takes more than a minute of it a minute on
/// a larger machine. Sharing the encoder between teams is the queue's turns' work, not this.
pub const EMBED_PASSAGES_PER_MINUTE: i64 = 6_000;
/// Ids or names in one list of a request: tags of a contact, assigned users, boards, filters.
pub const ID_LIST: Count = Count { min: 0, max: 100, default: 0 };
/// Tag names are unique per team regardless of case.
pub const TAG_NAME: Length = Length::new(1, 50);
/// Colours of tags and stages: `#RRGGBB`.
pub const COLOR_PATTERN: &str = r"^#[0-9A-Fa-f]{6}$";
pub fn is_color(value: &str) -> bool {
    value.len() == 7 && value.starts_with('#') && value[1..].chars().all(|c| c.is_ascii_hexdigit())
}
pub const BOARD_NAME: Length = Length::new(1, 100);
pub const STAGE_NAME: Length = Length::new(1, 50);
/// Stages of one board.
pub const BOARD_STAGES: Count = Count { min: 1, max: 50, default: 1 };
/// A custom field's name is the key of its values: a letter, then letters, digits or `_`.
pub const FIELD_NAME: Length = Length::new(1, 64);
pub const FIELD_NAME_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9_]*$";
pub fn is_field_name(value: &str) -> bool {
    let mut chars = value.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
pub const FIELD_LABEL: Length = Length::new(1, 100);
/// The choices of a `select` field, and each choice.
pub const FIELD_OPTIONS: Count = Count { min: 1, max: 100, default: 1 };
pub const FIELD_OPTION: Length = Length::new(1, 100);
/// A `text` value of a custom field.
pub const FIELD_TEXT: Length = Length::new(0, 5000);
/// Custom fields a team may define.
pub const TEAM_FIELDS: i64 = 100;

// An agent's runtime settings (issue 41).
/// What the agent says first.
pub const FIRST_MESSAGE: Length = Length::new(1, 2000);
/// A BCP 47 language tag (RFC 5646 allows longer ones; none in use is).
pub const LANGUAGE_TAG: Length = Length::new(2, 35);
/// A voice's or model's provider (`elevenlabs`, `openai`, ...).
pub const PROVIDER: Length = Length::new(1, 50);
pub const VOICE_ID: Length = Length::new(1, 255);
pub const MODEL_NAME: Length = Length::new(1, 255);
pub const VOICE_SPEED: Fraction = Fraction { min: 0.5, max: 2.0, default: 1.0 };
pub const TEMPERATURE: Fraction = Fraction { min: 0.0, max: 2.0, default: 1.0 };
/// Tools of one agent, and their names: what function-calling APIs accept.
pub const TOOLS: Count = Count { min: 0, max: 32, default: 0 };
pub const TOOL_NAME: Length = Length::new(1, 64);
pub const TOOL_NAME_PATTERN: &str = r"^[A-Za-z0-9_-]+$";
pub const TOOL_NAME_MESSAGE: &str = "must hold only letters, digits, _ and -";
pub fn is_tool_name(value: &str) -> bool {
    value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}
/// The description of a tool or of an analysis field, read by the model.
pub const TOOL_DESCRIPTION: Length = Length::new(0, 2000);
/// A tool's parameters schema, as JSON text.
pub const TOOL_PARAMETERS_BYTES: usize = 65_536;
/// What is extracted from each call: fields (named as custom fields are), and an enum's choices.
pub const ANALYSIS_FIELDS: Count = Count { min: 0, max: 50, default: 0 };
pub const ANALYSIS_CHOICES: Count = Count { min: 1, max: 50, default: 1 };
pub const ANALYSIS_CHOICE: Length = Length::new(1, 100);

// Webhooks.
/// A webhook's description.
pub const WEBHOOK_DESCRIPTION: Length = Length::new(0, 500);
/// Endpoints of one team.
pub const WEBHOOKS_PER_TEAM: usize = 50;
/// The balance under which `credits.low` is told.
pub const CREDITS_ALERT_MAX: i64 = 1_000_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_count_characters_and_refuse_blank_and_nul() {
        assert!(NAME.check("name", &"ü".repeat(255)).is_none());
        assert_eq!(NAME.check("name", &"ü".repeat(256)).unwrap().message, "must be 1 to 255 characters");
        assert_eq!(NAME.check("name", "   ").unwrap().message, "must not be blank");
        assert_eq!(NOTES.check("notes", "a\0b").unwrap().message, NUL_MESSAGE);
        assert!(NOTES.check("notes", "").is_none());
        assert_eq!(NOTES.message(), "must be at most 5000 characters");
    }

    /// The published patterns say what the code checks.
    #[test]
    fn the_patterns_agree_with_the_checks() {
        let pattern = |source: &str| regex::Regex::new(source).unwrap();
        let (no_nul, not_blank, email) = (pattern(NO_NUL_PATTERN), pattern(NOT_BLANK_PATTERN), pattern(EMAIL_PATTERN));
        for text in ["", " ", "a", " a ", "\u{85}", "\u{3000}x", "\u{feff}", "a\0b", "\t\n", "é"] {
            assert_eq!(no_nul.is_match(text), !text.contains('\0'), "{text:?}");
            let blank_ok = Length::new(1, 100).check("f", text).is_none();
            assert_eq!(not_blank.is_match(text), blank_ok, "{text:?}");
        }
        for text in ["a@b.c", "a@b", "a@.b", "a@b.", "a b@c.d", "@b.c", "a@b@c.d", "a@b..c", "ü@é.fr", "a@b.c\u{85}"]
        {
            assert_eq!(email.is_match(text), is_email(text), "{text:?}");
        }
        let (color, field_name) = (pattern(COLOR_PATTERN), pattern(FIELD_NAME_PATTERN));
        for text in ["#10B981", "#10b98", "10B981", "#10B98G", "#10B9811", "#ÿÿÿÿÿÿ", ""] {
            assert_eq!(color.is_match(text), is_color(text), "{text:?}");
        }
        for text in ["plan", "Plan_2", "_plan", "2plan", "plan-x", "é", ""] {
            assert_eq!(field_name.is_match(text), is_field_name(text), "{text:?}");
        }
    }

    #[test]
    fn numbers_are_bounded() {
        assert!(SEARCH_LIMIT.check("limit", 50).is_none());
        assert_eq!(SEARCH_LIMIT.check("limit", 51).unwrap().message, "must be an integer from 1 to 50");
        assert!(SEARCH_THRESHOLD.check("threshold", f64::NAN).is_some());
        assert!(SEARCH_THRESHOLD.check("threshold", 1.0).is_none());
    }
}
