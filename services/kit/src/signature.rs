//! Trigram signatures: a 1,024-bit Bloom filter of the trigrams of the text a row can be found
//! by, kept on the row itself (PostgreSQL `bit(1024)`).
//!
//! A frequent search on PostgreSQL walks the list's sort index and probes each row's search
//! text, and a probe is an index lookup and a heap read (about 6 µs). When the matches sit far
//! along the index (a word said only in the shortest calls, sorted by duration) the walk probed
//! thousands of rows for a page: 57-75 ms. Checking the signature first is a bit test on the
//! row the walk reads anyway, so only the rows that may hold the text are probed (at 100,000
//! calls: 15 ms for the same page).
//!
//! A text holding the query as a substring holds every trigram of the query, so its signature
//! has every bit of the query's: the check never loses a match, it only lets through the few
//! rows whose other trigrams happen to set the same bits, and the probe then refuses those.
//! Signatures only gain bits (an owner's is the OR of its texts'), so one that still carries the
//! bits of a text since replaced is merely less selective. The hash below is part of what is
//! stored: changing it would make stored signatures miss matches.

/// Bits in a signature. With 512, a call of the demo data had 46 % of its bits set and a
/// five-letter name passed the check of 19 % of the calls that do not say it; with 1,024, 27 %
/// and 0.2 % (bench/conversations.sh's calls). Long transcripts fill more bits: their checks
/// let more through, and the probe decides.
pub const BITS: usize = 1024;

/// The PostgreSQL type of a signature column.
pub const SQL_TYPE: &str = "bit(1024)";

/// A set of trigram bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature([u64; BITS / 64]);

impl Signature {
    /// The signature of a text already lowercased as its search row stores it: its trigrams of
    /// characters, none spanning a line break (a query is one line).
    pub fn of(text: &str) -> Signature {
        let mut bits = [0u64; BITS / 64];
        let chars: Vec<char> = text.chars().collect();
        for trigram in chars.windows(3).filter(|trigram| !trigram.contains(&'\n')) {
            let bit = trigram_bit(trigram);
            bits[bit / 64] |= 1 << (bit % 64);
        }
        Signature(bits)
    }

    /// No bit set: the text is shorter than a trigram.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|word| *word == 0)
    }

    /// As a PostgreSQL bit string (`'0110...'`, bit 0 first), to bind as `$n::bit(1024)` or
    /// write as `B'...'`.
    pub fn bit_string(&self) -> String {
        (0..BITS).map(|bit| if self.0[bit / 64] & (1 << (bit % 64)) != 0 { '1' } else { '0' }).collect()
    }
}

/// FNV-1a (64 bits) of the trigram's UTF-8, reduced to a bit number.
fn trigram_bit(trigram: &[char]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut buffer = [0u8; 4];
    for c in trigram {
        for byte in c.encode_utf8(&mut buffer).bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    usize::try_from(hash % BITS as u64).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covers(text: &Signature, query: &Signature) -> bool {
        text.0.iter().zip(query.0.iter()).all(|(t, q)| t & q == *q)
    }

    #[test]
    fn a_text_covers_every_substring_of_it() {
        let text = "what are your opening hours on saturdays?\non saturdays we are open from 9 am to 1 pm.";
        let signature = Signature::of(text);
        for query in ["saturdays", "open from 9", "rs?", "zürich", "hours on sat"] {
            let query_signature = Signature::of(query);
            if text.contains(query) {
                assert!(covers(&signature, &query_signature), "{query}");
            }
        }
        assert!(!covers(&signature, &Signature::of("kettle")), "a word it does not hold");
    }

    #[test]
    fn trigrams_do_not_span_lines() {
        assert!(Signature::of("ab\ncd").is_empty());
        assert!(Signature::of("ab").is_empty());
        assert!(!Signature::of("abc").is_empty());
    }

    #[test]
    fn the_hash_is_fixed() {
        // Stored signatures depend on it: this must never change.
        assert_eq!(trigram_bit(&['a', 'b', 'c']), 0xe71fa2190541574b_u64 as usize % BITS);
        let bits = Signature::of("abc").bit_string();
        assert_eq!(bits.len(), BITS);
        assert_eq!(bits.matches('1').count(), 1);
    }
}
