//! Sections of a page or document into Q&A entries, without a language model: a section's
//! heading is its question (the page title, or the source's name, for text before the
//! first heading) and its text is the answer, cut into chunks of about what the embedding
//! model reads so that each entry is found by what it says.

use super::html::Section;

/// About 256 tokens of English, what the embedding model reads of an entry.
pub const CHUNK_CHARS: usize = 1200;
/// A source yields at most this many entries.
pub const MAX_ENTRIES: usize = 2000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QaPair {
    pub question: String,
    pub answer: String,
}

pub fn from_sections(title: Option<&str>, source_name: &str, sections: &[Section]) -> Vec<QaPair> {
    let fallback = title.map(str::trim).filter(|t| !t.is_empty()).unwrap_or(source_name);
    let mut pairs = Vec::new();
    for section in sections {
        let question = section.heading.as_deref().map(str::trim).filter(|h| !h.is_empty()).unwrap_or(fallback);
        let question: String = question.chars().take(switchboard_kit::limits::QUESTION.max).collect();
        for chunk in chunks(&section.text, CHUNK_CHARS) {
            if pairs.len() == MAX_ENTRIES {
                return pairs;
            }
            pairs.push(QaPair { question: question.clone(), answer: chunk });
        }
    }
    pairs
}

/// Splits at paragraph ends, then sentence ends, then spaces, never inside a character;
/// paragraphs that share a chunk stay on their own lines.
pub fn chunks(text: &str, max_chars: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut current_chars = 0;
    for (piece, starts_paragraph) in pieces(text, max_chars) {
        let chars = piece.chars().count();
        if current_chars > 0 && current_chars + 1 + chars > max_chars {
            out.push(std::mem::take(&mut current));
            current_chars = 0;
        }
        if current_chars > 0 {
            current.push(if starts_paragraph { '\n' } else { ' ' });
            current_chars += 1;
        }
        current.push_str(piece);
        current_chars += chars;
    }
    if current_chars > 0 {
        out.push(current);
    }
    out
}

/// Pieces of at most `max_chars`, each flagged when it starts a paragraph: whole
/// paragraphs, or the sentences of long ones, or the words of long sentences, or slices of
/// long words.
fn pieces(text: &str, max_chars: usize) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    for paragraph in text.split('\n').map(str::trim).filter(|p| !p.is_empty()) {
        let start = out.len();
        if paragraph.chars().count() <= max_chars {
            out.push((paragraph, false));
        } else {
            for sentence in split_keeping(paragraph, ". ") {
                if sentence.chars().count() <= max_chars {
                    out.push((sentence, false));
                    continue;
                }
                for word in sentence.split_whitespace() {
                    let mut rest = word;
                    while rest.chars().count() > max_chars {
                        let cut = rest.char_indices().nth(max_chars).map_or(rest.len(), |(i, _)| i);
                        out.push((&rest[..cut], false));
                        rest = &rest[cut..];
                    }
                    if !rest.is_empty() {
                        out.push((rest, false));
                    }
                }
            }
        }
        if let Some(first) = out.get_mut(start) {
            first.1 = true;
        }
    }
    out
}

fn split_keeping<'a>(text: &'a str, separator: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (index, _) in text.match_indices(separator) {
        let end = index + separator.len() - 1;
        out.push(text[start..end].trim());
        start = end + 1;
    }
    out.push(text[start..].trim());
    out.into_iter().filter(|s| !s.is_empty()).collect()
}

/// Plain text: paragraphs grouped into chunks, all under the source's name.
pub fn plain_text_sections(text: &str) -> Vec<Section> {
    let text = text.replace("\r\n", "\n");
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n"))
        .filter(|p| !p.is_empty())
        .collect();
    if paragraphs.is_empty() {
        return Vec::new();
    }
    vec![Section { heading: None, text: paragraphs.join("\n") }]
}

/// Markdown: `#` headings open sections; the rest is kept as written.
pub fn markdown_sections(text: &str) -> Vec<Section> {
    let mut sections = Vec::new();
    let mut heading: Option<String> = None;
    let mut body: Vec<&str> = Vec::new();
    let mut in_code = false;
    let mut flush = |heading: Option<String>, body: &mut Vec<&str>| {
        let text = body.iter().map(|l| l.trim()).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n");
        if !text.is_empty() {
            sections.push(Section { heading, text });
        }
        body.clear();
    };
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let trimmed = line.trim_start();
        let level = trimmed.chars().take_while(|c| *c == '#').count();
        if !in_code && (1..=6).contains(&level) && trimmed[level..].starts_with(' ') {
            flush(heading.take(), &mut body);
            heading = Some(trimmed[level..].trim().trim_end_matches('#').trim().to_owned());
        } else {
            body.push(line);
        }
    }
    flush(heading, &mut body);
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_become_questions_and_intros_take_the_title() {
        let sections = vec![
            Section { heading: None, text: "Welcome to Acme.".into() },
            Section { heading: Some("Opening hours".into()), text: "9 to 5.".into() },
        ];
        let pairs = from_sections(Some("Acme Dental"), "homepage", &sections);
        assert_eq!(pairs[0], QaPair { question: "Acme Dental".into(), answer: "Welcome to Acme.".into() });
        assert_eq!(pairs[1].question, "Opening hours");
        assert_eq!(from_sections(None, "homepage", &sections)[0].question, "homepage");
    }

    #[test]
    fn long_sections_are_chunked_without_losing_text() {
        let paragraph = "This is a sentence about teeth. ".repeat(60);
        let text = format!("{paragraph}\nShort tail.");
        let parts = chunks(&text, 300);
        assert!(parts.len() > 5);
        assert!(parts.iter().all(|c| c.chars().count() <= 300), "{parts:?}");
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(words(&parts.join(" ")), words(&text));
    }

    #[test]
    fn unbroken_text_is_cut_on_character_boundaries() {
        let parts = chunks(&"é".repeat(250), 100);
        assert_eq!(parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(), [100, 100, 50]);
    }

    #[test]
    fn markdown_headings_open_sections_outside_code() {
        let sections = markdown_sections("Intro\n\n# Setup\nRun it.\n```\n# not a heading\n```\n## FAQ ##\nAsk.\n");
        let headings: Vec<_> = sections.iter().map(|s| s.heading.clone()).collect();
        assert_eq!(headings, [None, Some("Setup".into()), Some("FAQ".into())]);
        assert_eq!(sections[1].text, "Run it.\n# not a heading");
    }
}
