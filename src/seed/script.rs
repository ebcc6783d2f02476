//! What the demo conversations say: a few everyday scenarios of one small business's phone and
//! chat agent (one business per seed, [`business`]), varied by a seeded random source so that
//! lists, filters and searches have something to find, and the same seed always writes the same
//! conversations.

use rand::Rng;
use rand::rngs::StdRng;

/// One kind of call: how it goes, turn by turn, and what the summary says.
pub struct Scenario {
    /// Names the business (`{business}`), so that a summary read alone says whose call it was.
    pub summary: &'static str,
    /// `(speaker, text)`; `{name}` is the caller's first name, `{business}` and `{agent}` the
    /// business's and its agent's names.
    pub turns: &'static [(&'static str, &'static str)],
    /// A tool the agent calls midway, for the timeline.
    pub tool: Option<&'static str>,
    /// The analysis a runtime reports when the call was answered: what the turns say.
    pub outcome: Outcome,
}

/// A call's sentiment and whether it reached the caller's goal, as its transcript reads.
pub struct Outcome {
    pub sentiment: &'static str,
    pub successful: bool,
    /// The agent hands the caller to a person (a "transferred" event ends the timeline).
    pub transfer: bool,
}

/// A chat: the messages of a visitor and the agent, in turn.
pub struct ChatScript {
    /// Names the business (`{business}`).
    pub summary: &'static str,
    /// `(role, text)`, with the placeholders of [`Scenario::turns`]. The agent only says
    /// `{name}` as `Hello {name}!`, `, {name}` or ` {name}`: when the visitor's name is not known
    /// (a bare number or an address the team has no contact for), it is left out (see [`fill`]).
    pub messages: &'static [(&'static str, &'static str)],
}

/// The one business a seed's conversations are about (issue 40: summaries of a trattoria beside
/// chats of a dental clinic): every call, chat, summary and contact note of a seed is its.
pub struct Business {
    pub name: &'static str,
    /// The voice and chat agent's name.
    pub agent: &'static str,
    /// Calls people make to the business.
    pub calls: &'static [Scenario],
    /// Calls the agent makes (issue 55: an outgoing call opened with a receptionist's greeting):
    /// the agent says who is calling and why, the person called answers.
    pub outbound: &'static [Scenario],
    pub chats: &'static [ChatScript],
    /// What a contact note may say about a customer.
    pub notes: &'static [&'static str],
}

pub const BUSINESSES: [Business; 2] = [
    Business {
        name: "Bright Smile Dental",
        agent: "Ava",
        calls: &[
            Scenario {
                summary: "Rescheduled a check-up at {business} to next Tuesday at 8:45.",
                outcome: Outcome { sentiment: "positive", successful: true, transfer: false },
                turns: &[
                    ("agent", "Good morning, {business}, this is {agent}. How can I help you today?"),
                    ("caller", "Hi, this is {name}. I need to move my appointment on Thursday."),
                    (
                        "agent",
                        "Of course, {name}. I can see your check-up on Thursday at 10. What day suits you better?",
                    ),
                    ("caller", "Anything early next week, ideally in the morning."),
                    ("agent", "Monday at 9:30 or Tuesday at 8:45 are free. Which would you like?"),
                    ("caller", "Tuesday at 8:45 works."),
                    ("agent", "Done: Tuesday at 8:45. You will get a text confirmation shortly."),
                    ("caller", "Perfect, thank you so much."),
                    ("agent", "You're welcome, {name}. Have a lovely day."),
                ],
                tool: Some("reschedule_appointment"),
            },
            Scenario {
                summary: "Booked a first cleaning at {business}; asked whether insurance covers it.",
                outcome: Outcome { sentiment: "positive", successful: true, transfer: false },
                turns: &[
                    ("agent", "{business}, {agent} speaking. How can I help?"),
                    ("caller", "Hello, I'd like to book a cleaning. I'm new, my name is {name}."),
                    ("agent", "Welcome, {name}. Our hygienist has Wednesday at 2 pm or Friday at 11 am."),
                    ("caller", "Friday at 11, please. Does my insurance cover it?"),
                    (
                        "agent",
                        "Most plans cover two cleanings a year; bring your insurance card and we check it at the desk.",
                    ),
                    ("caller", "Great, see you Friday."),
                ],
                tool: Some("book_appointment"),
            },
            Scenario {
                summary: "Asked {business} for Saturday opening hours and parking.",
                outcome: Outcome { sentiment: "neutral", successful: true, transfer: false },
                turns: &[
                    ("agent", "{business}, this is {agent}. How can I help you?"),
                    ("caller", "What are your opening hours on Saturdays?"),
                    ("agent", "On Saturdays we are open from 9 am to 1 pm."),
                    ("caller", "And is there parking nearby?"),
                    ("agent", "Yes, there is a public car park behind the clinic, free for the first two hours."),
                    ("caller", "Brilliant, thank you."),
                ],
                tool: None,
            },
            Scenario {
                summary: "Billing question about a double charge at {business}; transferred to the front desk.",
                outcome: Outcome { sentiment: "negative", successful: false, transfer: true },
                turns: &[
                    ("agent", "Hello, you've reached {business}. This is {agent}, how can I help?"),
                    ("caller", "I was charged twice for my last filling, this is {name}."),
                    ("agent", "I'm sorry to hear that, {name}. Let me look at your account."),
                    ("caller", "Both payments went out on the first of the month."),
                    ("agent", "I can see the two payments. A refund needs our front desk; I'll transfer you now."),
                    ("caller", "Okay, thanks."),
                ],
                tool: None,
            },
        ],
        outbound: &[
            Scenario {
                summary: "{business} reminded the patient of tomorrow's check-up; confirmed.",
                outcome: Outcome { sentiment: "positive", successful: true, transfer: false },
                turns: &[
                    ("caller", "Hello?"),
                    (
                        "agent",
                        "Hello {name}, this is {agent} calling from {business} about your check-up tomorrow at 10.",
                    ),
                    ("caller", "Oh yes, thanks for the reminder."),
                    ("agent", "Can we count on you, or would you like another time?"),
                    ("caller", "Tomorrow at 10 is fine."),
                    ("agent", "Perfect, it's confirmed. See you tomorrow, {name}."),
                ],
                tool: Some("confirm_appointment"),
            },
            Scenario {
                summary: "{business} offered an earlier cleaning slot; the patient took it.",
                outcome: Outcome { sentiment: "positive", successful: true, transfer: false },
                turns: &[
                    ("caller", "Hello, {name} speaking."),
                    (
                        "agent",
                        "Hi {name}, this is {agent} from {business}. A cleaning slot opened this Thursday at 3 pm.",
                    ),
                    ("caller", "Oh, that's much sooner. Yes, I'll take it."),
                    ("agent", "Done: your cleaning is on Thursday at 3 pm, and next month's is cancelled."),
                    ("caller", "Thanks for calling."),
                ],
                tool: Some("reschedule_appointment"),
            },
        ],
        chats: &[
            ChatScript {
                summary: "Asked whether {business} takes walk-ins today.",
                messages: &[
                    ("user", "do you take walk ins today?"),
                    (
                        "agent",
                        "Hi {name}, this is {agent} at {business}. We keep two walk-in slots each afternoon from 2 pm.",
                    ),
                    ("user", "ok and how long is the wait usually"),
                    ("agent", "Usually under 30 minutes. Booking online guarantees a time."),
                ],
            },
            ChatScript {
                summary: "Asked {business} about whitening prices.",
                messages: &[
                    ("user", "Hi! How much is teeth whitening?"),
                    ("agent", "Hello {name}! At {business} an in-chair whitening is $320, a take-home kit $180."),
                    ("user", "Is it painful?"),
                    ("agent", "Some people feel sensitive for a day or two; the dentist checks your teeth first."),
                    ("user", "Great, thanks!"),
                ],
            },
            ChatScript {
                summary: "Cancelled a hygiene appointment at {business}.",
                messages: &[
                    ("user", "I need to cancel my appointment tomorrow."),
                    ("agent", "No problem, {name}. This is {agent} at {business}: which time was it?"),
                    ("user", "10:30 with the hygienist"),
                    ("agent", "Cancelled. Would you like me to find you another time next week?"),
                    ("user", "Not now, I'll call back."),
                ],
            },
        ],
        notes: &[
            "Prefers morning appointments.",
            "Nervous patient: explain each step.",
            "Due for a check-up in the spring.",
            "Asked about braces for a teenager.",
        ],
    },
    Business {
        name: "Northwind Goods",
        agent: "Max",
        calls: &[
            Scenario {
                summary: "Asked {business} where an order is; it ships tomorrow with tracking by e-mail.",
                outcome: Outcome { sentiment: "positive", successful: true, transfer: false },
                turns: &[
                    (
                        "agent",
                        "Thanks for calling {business}, I'm {agent}, the virtual assistant. What can I do for you?",
                    ),
                    ("caller", "Hello, this is {name}. I ordered a kettle last week and it hasn't arrived yet."),
                    ("agent", "I'm sorry about the wait, {name}. Could you give me your order number?"),
                    ("caller", "It's NW 48213."),
                    ("agent", "Thank you. Order NW48213 is packed and leaves our warehouse tomorrow morning."),
                    ("caller", "Will I get a tracking number?"),
                    ("agent", "Yes, the courier's tracking link is e-mailed to you as soon as it ships."),
                    ("caller", "Great, that's all I needed."),
                ],
                tool: Some("lookup_order"),
            },
            Scenario {
                summary: "Returned a faulty toaster to {business}; a prepaid label was e-mailed.",
                outcome: Outcome { sentiment: "neutral", successful: true, transfer: false },
                turns: &[
                    ("agent", "{business}, this is {agent}. How can I help?"),
                    ("caller", "Hi, it's {name}. The toaster I bought stopped working after a week."),
                    ("agent", "I'm sorry, {name}. It is under warranty: I can send you a prepaid return label."),
                    ("caller", "Yes please. Do I get a new one or my money back?"),
                    ("agent", "Your choice: a replacement ships as soon as the courier scans the parcel."),
                    ("caller", "A replacement, then."),
                    ("agent", "Done. The label is in your inbox."),
                ],
                tool: Some("create_return"),
            },
            Scenario {
                summary: "Billing question about a double charge at {business}; transferred to accounts.",
                outcome: Outcome { sentiment: "negative", successful: false, transfer: true },
                turns: &[
                    ("agent", "Hello, you've reached {business} customer care. How can I help?"),
                    ("caller", "I was charged twice for the same order, this is {name}."),
                    ("agent", "I'm sorry to hear that. Let me check your account, {name}."),
                    ("caller", "Both payments went out on the first of the month."),
                    ("agent", "I can see the two payments. A refund needs our accounts team; I'll transfer you now."),
                    ("caller", "Okay, thanks."),
                ],
                tool: None,
            },
            Scenario {
                summary: "Asked {business} whether the warehouse shop is open on Sundays.",
                outcome: Outcome { sentiment: "neutral", successful: true, transfer: false },
                turns: &[
                    ("agent", "{business}, {agent} speaking. What can I do for you?"),
                    ("caller", "Is your warehouse shop open on Sundays?"),
                    ("agent", "It is, from 10 am to 4 pm, and click-and-collect orders wait at the counter."),
                    ("caller", "Perfect, thank you."),
                ],
                tool: None,
            },
        ],
        outbound: &[
            Scenario {
                summary: "{business} called to arrange the delivery of a large order; a day was agreed.",
                outcome: Outcome { sentiment: "positive", successful: true, transfer: false },
                turns: &[
                    ("caller", "Hello?"),
                    ("agent", "Hello {name}, this is {agent} calling from {business} about your sofa order."),
                    ("caller", "Oh great, is it ready?"),
                    ("agent", "It is. Our courier can bring it on Wednesday or Friday, between 8 and noon."),
                    ("caller", "Friday, please."),
                    ("agent", "Booked for Friday morning. You'll get a text when the driver is on the way."),
                ],
                tool: Some("schedule_delivery"),
            },
            Scenario {
                summary: "{business} followed up on a return; the refund was confirmed.",
                outcome: Outcome { sentiment: "neutral", successful: true, transfer: false },
                turns: &[
                    ("caller", "Yes, {name} here."),
                    ("agent", "Hi {name}, it's {agent} from {business}. We received the toaster you sent back."),
                    ("caller", "Good. When do I get my money?"),
                    ("agent", "The refund went out today and shows on your card within three working days."),
                    ("caller", "Okay, thank you."),
                ],
                tool: None,
            },
        ],
        chats: &[
            ChatScript {
                summary: "Asked {business} about shipping costs to Canada.",
                messages: &[
                    ("user", "Hi! Do you ship to Canada?"),
                    ("agent", "Hello {name}! Yes, {business} ships to Canada in 5 to 7 business days."),
                    ("user", "How much does shipping cost?"),
                    ("agent", "International delivery is a flat $14.90, free above $120."),
                    ("user", "Great, thanks!"),
                ],
            },
            ChatScript {
                summary: "Changed the delivery address of a {business} order.",
                messages: &[
                    ("user", "I entered the wrong delivery address for my order."),
                    ("agent", "No problem, {name}. This is {agent} at {business}: what's the order number?"),
                    ("user", "NW 51877"),
                    ("agent", "Thanks. It hasn't shipped yet, so I can update it. What is the correct address?"),
                    ("user", "12 Harbour Street, Leith, EH6 6JT"),
                    ("agent", "Updated. Your order will go to 12 Harbour Street, Leith."),
                ],
            },
            ChatScript {
                summary: "Asked {business} whether a kettle comes in black.",
                messages: &[
                    ("user", "does the glass kettle come in black?"),
                    ("agent", "Hi {name}, {agent} from {business} here. It does, and it's back in stock on Monday."),
                    ("user", "can you tell me when"),
                    ("agent", "Leave your e-mail on the product page and we write to you the day it arrives."),
                ],
            },
        ],
        notes: &[
            "Orders every month; prefers courier delivery.",
            "Returned two items this year.",
            "Asked for a business invoice.",
            "Interested in the kitchen range.",
        ],
    },
];

/// The business of a seed: seeds 1, 3, 5… are the dental clinic, 2, 4, 6… the shop.
pub fn business(seed: u64) -> &'static Business {
    &BUSINESSES[(seed.wrapping_sub(1) % BUSINESSES.len() as u64) as usize]
}

/// A line of a script with its placeholders filled. Without a name, the agent's `Hello {name}!`,
/// `, {name}` and ` {name}` go (`Hi {name}, we…` reads `Hi, we…`): nobody is greeted by a name
/// the team does not know.
pub fn fill(text: &str, business: &Business, name: Option<&str>) -> String {
    let text = text.replace("{business}", business.name).replace("{agent}", business.agent);
    match name {
        Some(name) => text.replace("{name}", name),
        None => text.replace(", {name}", "").replace(" {name}", "").replace("{name}", "there"),
    }
}

pub const FIRST_NAMES: [&str; 12] =
    ["Grace", "Liam", "Sofia", "Noah", "Amara", "Mateo", "Chloé", "Kenji", "Priya", "Oliver", "Zanele", "Lukas"];

/// The business's own lines: an incoming call is to one of them, an outgoing one from it. They
/// are in an area code (718) and a country (UK) that no demo contact's number uses
/// (`crm::number`), so that no contact owns the team's line (issue 40).
pub const TEAM_NUMBERS: [&str; 2] = ["+17185550100", "+442079460000"];

/// The number of somebody who is not a contact: fictional (555-01xx of area code 929, or Ofcom's
/// drama range in London), in ranges neither the contacts nor the team's lines use.
pub fn stranger_number(rng: &mut StdRng) -> String {
    if rng.random_bool(0.7) {
        format!("+19295550{:03}", rng.random_range(100..200))
    } else {
        format!("+44207946{:04}", rng.random_range(100..1000))
    }
}

pub fn first_name(rng: &mut StdRng) -> &'static str {
    FIRST_NAMES[rng.random_range(0..FIRST_NAMES.len())]
}

/// What is said after a scenario's own turns, when a call is longer than it: a conversation that
/// goes on about the account, in turn, without numbering its lines (issue 55: "(3)" padding).
const FURTHER: [(&str, &str); 8] = [
    ("agent", "Is there anything else I can help you with, {name}?"),
    ("caller", "Actually, yes. Could you check the e-mail address you have for me?"),
    ("agent", "Of course. It ends in example.com; is that still right?"),
    ("caller", "That's the one. And can I get the receipts by e-mail from now on?"),
    ("agent", "Done: every receipt goes to that address from today."),
    ("caller", "One more thing: is my phone number up to date too?"),
    ("agent", "It is, it's the number you're calling from."),
    ("caller", "Great, that's everything then."),
];

/// `count` turns of a scenario: its own turns, then as many further exchanges as asked, so a
/// long call still reads like one.
pub fn turns(scenario: &Scenario, business: &Business, name: &str, count: usize) -> Vec<(&'static str, String)> {
    let own = scenario.turns.len();
    (0..count)
        .map(|n| match scenario.turns.get(n) {
            Some((speaker, text)) => (*speaker, fill(text, business, Some(name))),
            None => {
                // Turns alternate: the first further line is the agent's after a caller's turn.
                let start = usize::from(scenario.turns.last().is_some_and(|(speaker, _)| *speaker == "agent"));
                let (speaker, text) = FURTHER[(n - own + start) % FURTHER.len()];
                (speaker, fill(text, business, Some(name)))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 55: long calls went on with "Is there anything else I can help you with? (3)".
    #[test]
    fn a_long_call_reads_like_a_conversation_without_numbered_lines() {
        for business in &BUSINESSES {
            for scenario in business.calls.iter().chain(business.outbound) {
                let lines = turns(scenario, business, "Grace", 60);
                assert_eq!(lines.len(), 60);
                for pair in lines.windows(2) {
                    assert_ne!(pair[0].0, pair[1].0, "turns alternate: {pair:?}");
                }
                for (_, text) in &lines {
                    assert!(!text.contains('{') && !text.contains(" ("), "{text}");
                }
            }
        }
    }

    /// Issue 55: an outgoing call opened like a receptionist taking a call.
    #[test]
    fn in_an_outgoing_call_the_agent_says_who_is_calling() {
        for business in &BUSINESSES {
            assert!(!business.outbound.is_empty());
            for scenario in business.outbound {
                let (_, first_agent_line) = scenario.turns.iter().find(|(speaker, _)| *speaker == "agent").unwrap();
                let line = fill(first_agent_line, business, Some("Grace"));
                assert!(line.contains(business.name) && (line.contains("calling") || line.contains("from")), "{line}");
                assert!(!line.contains("How can I help"), "{line}");
            }
        }
    }
}
