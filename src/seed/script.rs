//! What the demo conversations say: a few everyday scenarios of a small business's phone and
//! chat agents, varied by a seeded random source so that lists, filters and searches have
//! something to find, and the same seed always writes the same conversations.

use rand::Rng;
use rand::rngs::StdRng;

/// One kind of call: how it goes, turn by turn, and what the summary says.
pub struct Scenario {
    pub summary: &'static str,
    /// `(speaker, text)`; `{name}` is the caller's first name.
    pub turns: &'static [(&'static str, &'static str)],
    /// A tool the agent calls midway, for the timeline.
    pub tool: Option<&'static str>,
}

pub const CALLS: [Scenario; 5] = [
    Scenario {
        summary: "Rescheduled a dental check-up to next week.",
        turns: &[
            ("agent", "Good morning, Bright Smile Dental, this is Ava. How can I help you today?"),
            ("caller", "Hi, this is {name}. I need to move my appointment on Thursday."),
            ("agent", "Of course, {name}. I can see your check-up on Thursday at 10. What day suits you better?"),
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
        summary: "Asked where an order is; it ships tomorrow with tracking by e-mail.",
        turns: &[
            ("agent", "Thanks for calling Northwind Goods, I'm the virtual assistant. What can I do for you?"),
            ("caller", "Hello, I ordered a kettle last week and it hasn't arrived yet."),
            ("agent", "I'm sorry about the wait. Could you give me your order number?"),
            ("caller", "It's NW 48213."),
            ("agent", "Thank you. Order NW48213 is packed and leaves our warehouse tomorrow morning."),
            ("caller", "Will I get a tracking number?"),
            ("agent", "Yes, the courier's tracking link is e-mailed to you as soon as it ships."),
            ("caller", "Great, that's all I needed."),
        ],
        tool: Some("lookup_order"),
    },
    Scenario {
        summary: "Booked a table for four on Friday at 7 pm; asked about vegan options.",
        turns: &[
            ("agent", "Trattoria Bella, good evening! Would you like to book a table?"),
            ("caller", "Yes please, for four people on Friday night."),
            ("agent", "Lovely. What time would you like, and may I have a name for the booking?"),
            ("caller", "Seven o'clock, under {name}."),
            ("agent", "Friday at 7 pm for four, under {name}. Any dietary requirements?"),
            ("caller", "One of us is vegan, is that a problem?"),
            ("agent", "Not at all, the menu has several vegan pastas and a vegan tiramisu."),
            ("caller", "Wonderful, see you Friday."),
        ],
        tool: Some("book_table"),
    },
    Scenario {
        summary: "Billing question about a double charge; transferred to accounts.",
        turns: &[
            ("agent", "Hello, you've reached Acme Internet support. How can I help?"),
            ("caller", "I was charged twice for this month's invoice."),
            ("agent", "I'm sorry to hear that. Let me check your account, {name}."),
            ("caller", "Both payments went out on the first of the month."),
            ("agent", "I can see the two payments. A refund needs our accounts team; I'll transfer you now."),
            ("caller", "Okay, thanks."),
        ],
        tool: None,
    },
    Scenario {
        summary: "Caller asked for opening hours and parking near the clinic.",
        turns: &[
            ("agent", "City Physio, how can I help you?"),
            ("caller", "What are your opening hours on Saturdays?"),
            ("agent", "On Saturdays we are open from 9 am to 1 pm."),
            ("caller", "And is there parking nearby?"),
            ("agent", "Yes, there is a public car park behind the clinic, free for the first two hours."),
            ("caller", "Brilliant, thank you."),
        ],
        tool: None,
    },
];

/// A chat: the messages of a visitor and the agent, in turn.
pub struct ChatScript {
    pub summary: &'static str,
    pub messages: &'static [(&'static str, &'static str)],
}

pub const CHATS: [ChatScript; 3] = [
    ChatScript {
        summary: "Asked about international shipping costs.",
        messages: &[
            ("user", "Hi! Do you ship to Canada?"),
            ("agent", "Hello {name}! Yes, we ship to Canada in 5 to 7 business days."),
            ("user", "How much does shipping cost?"),
            ("agent", "International delivery is a flat $14.90, free above $120."),
            ("user", "Great, thanks!"),
        ],
    },
    ChatScript {
        summary: "Wanted to change the delivery address of an order.",
        messages: &[
            ("user", "I entered the wrong delivery address for my order."),
            ("agent", "No problem, {name}. What's the order number?"),
            ("user", "NW 51877"),
            ("agent", "Thanks. It hasn't shipped yet, so I can update it. What is the correct address?"),
            ("user", "12 Harbour Street, Leith, EH6 6JT"),
            ("agent", "Updated. Your order will go to 12 Harbour Street, Leith."),
        ],
    },
    ChatScript {
        summary: "Asked whether the clinic takes walk-ins.",
        messages: &[
            ("user", "do you take walk ins today?"),
            ("agent", "Hi {name}, we keep two walk-in slots each afternoon from 2 pm."),
            ("user", "ok and how long is the wait usually"),
            ("agent", "Usually under 30 minutes. Booking online guarantees a time."),
        ],
    },
];

pub const FIRST_NAMES: [&str; 12] =
    ["Grace", "Liam", "Sofia", "Noah", "Amara", "Mateo", "Chloé", "Kenji", "Priya", "Oliver", "Zanele", "Lukas"];

/// The business's own numbers: an incoming call is to one of them, an outgoing one from it.
pub const TEAM_NUMBERS: [&str; 2] = ["+16285550100", "+442079460000"];

/// A fictional number (the 555-01xx range in North America, Ofcom's drama range in the UK).
pub fn customer_number(rng: &mut StdRng) -> String {
    if rng.random_bool(0.8) {
        let area = ["415", "628", "212", "312", "617", "303"][rng.random_range(0..6)];
        format!("+1{area}5550{:03}", rng.random_range(100..200))
    } else {
        format!("+4420794600{:02}", rng.random_range(10..100))
    }
}

pub fn first_name(rng: &mut StdRng) -> &'static str {
    FIRST_NAMES[rng.random_range(0..FIRST_NAMES.len())]
}

/// `count` turns of a scenario: its own turns, then as many further exchanges as asked, so a
/// long call still reads like one.
pub fn turns(scenario: &Scenario, name: &str, count: usize) -> Vec<(&'static str, String)> {
    (0..count)
        .map(|n| match scenario.turns.get(n) {
            Some((speaker, text)) => (*speaker, text.replace("{name}", name)),
            None if n % 2 == 0 => ("agent", format!("Is there anything else I can help you with? ({})", n / 2)),
            None => ("caller", format!("One more question about my account, number {}.", n / 2)),
        })
        .collect()
}
