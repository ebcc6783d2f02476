//! Tokens of PDF syntax, counted as they stream by: what a content or object stream will cost
//! the library (an instruction or object held in memory for each) is known without keeping
//! the stream, and reading stops at the cap.

use std::collections::HashMap;

use super::syntax::{hex_value, is_regular, is_whitespace};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Lex {
    #[default]
    Between,
    Comment,
    Word,
    Name,
    Literal,
    Hex,
    Less,
    Greater,
}

/// Counts the tokens of content or object-stream syntax (numbers, names, strings, operators,
/// brackets), and the forms drawn (`/Name Do`, by the first operand as the PDF reader takes
/// it), stopping once `cap` tokens are reached.
#[derive(Default)]
pub(super) struct Tokens {
    pub(super) count: u64,
    cap: u64,
    pub(super) draws: HashMap<Vec<u8>, u64>,
    state: Lex,
    name: Vec<u8>,
    word: [u8; 3],
    word_len: usize,
    literal_depth: usize,
    escape: bool,
    /// Array and dictionary nesting: only top-level objects are operands.
    nesting: usize,
    operands: usize,
    first_name: Option<Vec<u8>>,
}

impl Tokens {
    pub(super) fn new(cap: u64) -> Self {
        Tokens { cap, ..Tokens::default() }
    }

    pub(super) fn full(&self) -> bool {
        self.count > self.cap
    }

    pub(super) fn feed(&mut self, bytes: &[u8]) {
        for &c in bytes {
            self.byte(c);
        }
    }

    pub(super) fn finish(&mut self) {
        match self.state {
            Lex::Word => self.end_word(),
            Lex::Name => self.end_name(),
            Lex::Literal | Lex::Hex | Lex::Less | Lex::Greater => self.operand(),
            Lex::Between | Lex::Comment => {}
        }
        self.state = Lex::Between;
    }

    fn operand(&mut self) {
        self.count += 1;
        if self.nesting == 0 {
            self.operands += 1;
        }
    }

    fn end_word(&mut self) {
        self.state = Lex::Between;
        let word = &self.word[..self.word_len.min(3)];
        let number = word.first().is_some_and(|c| c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.'));
        if number || self.word_len <= 5 && [&b"tru"[..], b"fal", b"nul"].contains(&word) {
            self.operand();
            return;
        }
        self.count += 1;
        if self.nesting == 0 {
            if self.word_len == 2
                && word == b"Do"
                && let Some(name) = self.first_name.take()
            {
                *self.draws.entry(name).or_insert(0) += 1;
            }
            self.operands = 0;
            self.first_name = None;
        }
    }

    fn end_name(&mut self) {
        self.state = Lex::Between;
        if self.nesting == 0 && self.operands == 0 {
            self.first_name = Some(decode_name(&self.name));
        }
        self.operand();
        self.name.clear();
    }

    fn byte(&mut self, c: u8) {
        match self.state {
            Lex::Comment => {
                if c == b'\r' || c == b'\n' {
                    self.state = Lex::Between;
                }
            }
            Lex::Word => {
                if is_regular(c) {
                    if self.word_len < 3 {
                        self.word[self.word_len] = c;
                    }
                    self.word_len = self.word_len.saturating_add(1);
                } else {
                    self.end_word();
                    self.byte(c);
                }
            }
            Lex::Name => {
                if is_regular(c) {
                    self.name.push(c);
                } else {
                    self.end_name();
                    self.byte(c);
                }
            }
            Lex::Literal => {
                if self.escape {
                    self.escape = false;
                } else if c == b'\\' {
                    self.escape = true;
                } else if c == b'(' {
                    self.literal_depth += 1;
                } else if c == b')' {
                    self.literal_depth -= 1;
                    if self.literal_depth == 0 {
                        self.state = Lex::Between;
                        self.operand();
                    }
                }
            }
            Lex::Hex => {
                if c == b'>' {
                    self.state = Lex::Between;
                    self.operand();
                }
            }
            Lex::Less => {
                if c == b'<' {
                    self.state = Lex::Between;
                    self.open();
                } else {
                    self.state = Lex::Hex;
                    self.byte(c);
                }
            }
            Lex::Greater => {
                self.state = Lex::Between;
                if c == b'>' {
                    self.close();
                } else {
                    self.count += 1;
                    self.byte(c);
                }
            }
            Lex::Between => match c {
                _ if is_whitespace(c) => {}
                b'%' => self.state = Lex::Comment,
                b'/' => self.state = Lex::Name,
                b'(' => {
                    self.state = Lex::Literal;
                    self.literal_depth = 1;
                }
                b'<' => self.state = Lex::Less,
                b'>' => self.state = Lex::Greater,
                b'[' => self.open(),
                b']' => self.close(),
                b'{' | b'}' | b')' => self.count += 1,
                _ => {
                    self.state = Lex::Word;
                    self.word = [c, 0, 0];
                    self.word_len = 1;
                }
            },
        }
    }

    /// `[` or `<<`: an operand opens.
    fn open(&mut self) {
        if self.nesting == 0 {
            self.operands += 1;
        }
        self.count += 1;
        self.nesting = self.nesting.saturating_add(1);
    }

    fn close(&mut self) {
        self.count += 1;
        self.nesting = self.nesting.saturating_sub(1);
    }
}

fn decode_name(raw: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(raw.len());
    let mut index = 0;
    while index < raw.len() {
        match (
            raw[index],
            raw.get(index + 1).copied().and_then(hex_value),
            raw.get(index + 2).copied().and_then(hex_value),
        ) {
            (b'#', Some(high), Some(low)) => {
                name.push(high << 4 | low);
                index += 3;
            }
            (c, _, _) => {
                name.push(c);
                index += 1;
            }
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_forms_are_found_by_their_first_operand() {
        // The PDF reader draws `operands[0]`: `[/B] 1 Do` and `<<...>> /H Do` draw nothing.
        let mut tokens = Tokens::new(1000);
        tokens.feed(b"q /A Do Q [/B] 1 Do /C#41 /D Do % /E Do\n(/F Do) Tj <</G 1>> /H Do /A Do");
        tokens.finish();
        let mut draws: Vec<_> = tokens.draws.into_iter().collect();
        draws.sort();
        assert_eq!(draws, [(b"A".to_vec(), 2), (b"CA".to_vec(), 1)]);
        assert_eq!(tokens.count, 22);
    }
}
