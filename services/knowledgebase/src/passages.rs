//! Long entries are embedded as passages.
//!
//! The embedding model reads a few hundred tokens (256 for all-MiniLM-L6-v2) and ignores the
//! rest, so one vector per entry left the end of a long answer unsearchable. An answer longer
//! than [`WINDOW_WORDS`] is cut into as few passages of at most that many words as cover it,
//! all of about the same length, each headed by the question. Every passage gets a dense and a
//! BM25 vector in the index; a search scores an entry by its best passage. A short entry is one
//! passage whose text is [`EntryText::embedding_input`], so its vector is the one it always had.
//!
//! Words rather than model tokens keep the rule independent of the model: 128 words of
//! English prose are about 170-200 WordPiece tokens, which with the question fits the window.
//!
//! The passages do not overlap, and are cut evenly: the model's time goes with the words it
//! reads, and the rule before this one (windows of 128 words every 96, the last moved back to
//! end with the answer) read 1.39 times the words on SciFact, a 129-word answer as two full
//! windows. nDCG@10 on SciFact's train split: BENCHMARKS.md, issue 43.

use crate::embed::Embedder;
use crate::store::EntryText;

/// Words of the answer in one passage, at most.
pub const WINDOW_WORDS: usize = 128;
/// Words of the question repeated at the head of each passage of a long entry.
const QUESTION_HEAD_WORDS: usize = 32;

/// The texts to embed for an entry, in passage order.
pub fn passages(text: &EntryText) -> Vec<String> {
    let words: Vec<&str> = text.answer.split_whitespace().collect();
    if words.len() <= WINDOW_WORDS {
        return vec![text.embedding_input()];
    }
    let question: Vec<&str> = text.question.split_whitespace().take(QUESTION_HEAD_WORDS).collect();
    let question = question.join(" ");
    let count = words.len().div_ceil(WINDOW_WORDS);
    let size = words.len().div_ceil(count);
    words.chunks(size).map(|part| format!("{question}\n{}", part.join(" "))).collect()
}

/// What `embedding_model` records for vectors made under this rule: the model and the passage
/// rule, so that changing either marks every entry stale for `admin reindex`.
pub fn embedding_tag(model: &str) -> String {
    format!("{model}; passages of at most {WINDOW_WORDS} words, even")
}

/// How many passages the entries make: what embedding them asks of the encoder.
pub fn count(texts: &[EntryText]) -> usize {
    texts.iter().map(|text| passages(text).len()).sum()
}

/// Embeds every passage of each entry for `team_id` (whose turn in the encoder's queue it
/// takes: `embed/batch.rs`): the vectors of one entry, concatenated in passage order (how they
/// are stored), per entry.
pub async fn embed_entries(
    embedder: &dyn Embedder,
    team_id: &str,
    texts: &[EntryText],
) -> anyhow::Result<Vec<Vec<f32>>> {
    let per_entry: Vec<Vec<String>> = texts.iter().map(passages).collect();
    let counts: Vec<usize> = per_entry.iter().map(Vec::len).collect();
    let vectors = embedder.embed_for(team_id, per_entry.into_iter().flatten().collect()).await?;
    let expected: usize = counts.iter().sum();
    anyhow::ensure!(
        vectors.len() == expected,
        "the embedder returned {} vectors for {expected} passages",
        vectors.len()
    );
    let mut vectors = vectors.into_iter();
    Ok(counts.into_iter().map(|count| vectors.by_ref().take(count).flatten().collect()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(question: &str, words: usize) -> EntryText {
        let answer: Vec<String> = (0..words).map(|i| format!("w{i}")).collect();
        EntryText { question: question.to_owned(), answer: answer.join(" ") }
    }

    #[test]
    fn a_short_entry_is_one_passage_of_its_usual_text() {
        let text = EntryText { question: "Opening hours?".into(), answer: "Nine to five,\nevery day.".into() };
        assert_eq!(passages(&text), vec![text.embedding_input()]);
        assert_eq!(passages(&entry("Q", WINDOW_WORDS)).len(), 1);
    }

    #[test]
    fn a_long_entry_is_cut_into_the_fewest_even_passages_that_cover_it() {
        let text = entry("Title", 300);
        let passages = passages(&text);
        // Three passages of 100 words: two of 128 would not cover 300.
        assert_eq!(passages.len(), 3);
        let mut covered = Vec::new();
        for passage in &passages {
            let (question, body) = passage.split_once('\n').unwrap();
            assert_eq!(question, "Title");
            assert_eq!(body.split(' ').count(), 100);
            covered.extend(body.split(' ').map(str::to_owned));
        }
        let answer: Vec<String> = (0..300).map(|i| format!("w{i}")).collect();
        assert_eq!(covered, answer, "every word once, in order");
        let one_more = super::passages(&entry("Title", WINDOW_WORDS + 1));
        assert_eq!(one_more.len(), 2);
        assert!(one_more[0].ends_with(" w64") && one_more[1].starts_with("Title\nw65 "));
        assert!(one_more[1].ends_with(&format!(" w{WINDOW_WORDS}")));
        for words in [WINDOW_WORDS + 1, 2 * WINDOW_WORDS, 2 * WINDOW_WORDS + 1, 1000] {
            let passages = super::passages(&entry("T", words));
            assert_eq!(passages.len(), words.div_ceil(WINDOW_WORDS), "{words} words");
            assert!(passages.iter().all(|p| p.split(' ').count() <= WINDOW_WORDS), "{words} words");
        }
    }

    #[test]
    fn a_long_question_is_cut_at_the_head_of_each_passage() {
        let question: Vec<String> = (0..100).map(|i| format!("q{i}")).collect();
        let passages = passages(&entry(&question.join(" "), 200));
        let head = passages[0].split_once('\n').unwrap().0;
        assert_eq!(head.split(' ').count(), QUESTION_HEAD_WORDS);
    }
}
