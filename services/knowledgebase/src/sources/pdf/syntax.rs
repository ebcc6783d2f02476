//! The file's syntax, read as lopdf reads it (its src/parser/mod.rs): the scan must find stream
//! dictionaries, trailers and the encryption dictionary exactly where the library will, or a
//! stream could reach the library unchecked. Anything the scan cannot read as the library
//! would makes the file refused rather than guessed at.

use std::collections::HashSet;

use pdf_extract::{Dictionary, Object, ObjectId, StringFormat};

/// The library's bounds on nesting (`reader::MAX_NESTING_DEPTH` and `MAX_BRACKET`).
pub(super) const MAX_NESTING: usize = 100;
const MAX_BRACKET: usize = 100;
/// How far past an `obj` keyword a stream's dictionary is looked for, and how many objects
/// it may hold: real stream dictionaries are far smaller.
pub(super) const DICTIONARY_WINDOW: usize = 1024 * 1024;
const DICTIONARY_OBJECTS: usize = 100_000;

pub(super) fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0 | 0x0C)
}

fn is_delimiter(c: u8) -> bool {
    b"()<>[]{}/%".contains(&c)
}

pub(super) fn is_regular(c: u8) -> bool {
    !is_whitespace(c) && !is_delimiter(c)
}

pub(super) fn hex_value(c: u8) -> Option<u8> {
    (c as char).to_digit(16).and_then(|v| u8::try_from(v).ok())
}

pub(super) struct Syntax<'a> {
    data: &'a [u8],
    pub(super) pos: usize,
    /// The furthest byte looked at, for the scan's budget.
    furthest: usize,
    objects: usize,
}

impl<'a> Syntax<'a> {
    pub(super) fn new(data: &'a [u8], pos: usize) -> Self {
        Syntax { data, pos, furthest: pos, objects: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    fn at(&self, offset: usize) -> Option<u8> {
        self.data.get(self.pos + offset).copied()
    }

    fn advance(&mut self, n: usize) {
        self.pos += n;
        self.furthest = self.furthest.max(self.pos);
    }

    fn tag(&mut self, tag: &[u8]) -> bool {
        if self.data.get(self.pos..).is_some_and(|rest| rest.starts_with(tag)) {
            self.advance(tag.len());
            true
        } else {
            false
        }
    }

    fn eol(&mut self) -> bool {
        self.tag(b"\r\n") || self.tag(b"\n") || self.tag(b"\r")
    }

    /// Whitespace and comments (a comment runs to an end of line it needs).
    pub(super) fn space(&mut self) {
        loop {
            let start = self.pos;
            while self.peek().is_some_and(is_whitespace) {
                self.advance(1);
            }
            if self.peek() == Some(b'%') {
                let comment = self.pos;
                while self.peek().is_some_and(|c| c != b'\r' && c != b'\n') {
                    self.advance(1);
                }
                if !self.eol() {
                    self.pos = comment;
                }
            }
            if self.pos == start {
                return;
            }
        }
    }

    /// Spaces and tabs only.
    fn space0(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.advance(1);
        }
    }

    fn digits(&mut self) -> &'a [u8] {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.advance(1);
        }
        &self.data[start..self.pos]
    }

    pub(super) fn unsigned<T: std::str::FromStr>(&mut self) -> Option<T> {
        let start = self.pos;
        let value = std::str::from_utf8(self.digits()).ok().and_then(|digits| digits.parse().ok());
        if value.is_none() {
            self.pos = start;
        }
        value
    }

    fn reference(&mut self) -> Option<Object> {
        let start = self.pos;
        let id = self.unsigned::<u32>().and_then(|id| {
            self.space();
            let generation = self.unsigned::<u16>()?;
            self.space();
            self.tag(b"R").then_some((id, generation))
        });
        if id.is_none() {
            self.pos = start;
        }
        id.map(Object::Reference)
    }

    /// A real (`1.5`, `-.5`, `3.`) or an integer, as lopdf tries them.
    pub(super) fn number(&mut self) -> Option<Object> {
        let start = self.pos;
        if matches!(self.peek(), Some(b'+' | b'-')) {
            self.advance(1);
        }
        let whole = !self.digits().is_empty();
        if self.peek() == Some(b'.') && (whole || self.at(1).is_some_and(|c| c.is_ascii_digit())) {
            self.advance(1);
            self.digits();
            let real = std::str::from_utf8(&self.data[start..self.pos]).ok().and_then(|t| t.parse::<f32>().ok());
            if real.is_none() {
                self.pos = start;
            }
            return real.map(Object::Real);
        }
        let integer = whole
            .then(|| std::str::from_utf8(&self.data[start..self.pos]).ok().and_then(|t| t.parse::<i64>().ok()))
            .flatten();
        if integer.is_none() {
            self.pos = start;
        }
        integer.map(Object::Integer)
    }

    fn name(&mut self) -> Option<Vec<u8>> {
        if !self.tag(b"/") {
            return None;
        }
        let mut name = Vec::new();
        loop {
            match self.peek() {
                Some(b'#') => match (self.at(1).and_then(hex_value), self.at(2).and_then(hex_value)) {
                    (Some(high), Some(low)) => {
                        name.push(high << 4 | low);
                        self.advance(3);
                    }
                    _ => return Some(name),
                },
                Some(c) if is_regular(c) => {
                    name.push(c);
                    self.advance(1);
                }
                _ => return Some(name),
            }
        }
    }

    fn literal(&mut self) -> Option<Vec<u8>> {
        let start = self.pos;
        if !self.tag(b"(") {
            return None;
        }
        let mut out = Vec::new();
        if self.literal_inner(MAX_BRACKET, &mut out) && self.tag(b")") {
            Some(out)
        } else {
            self.pos = start;
            None
        }
    }

    /// The inside of a literal string up to its closing parenthesis; false when a nested
    /// string or an escape is cut short.
    fn literal_inner(&mut self, depth: usize, out: &mut Vec<u8>) -> bool {
        loop {
            match self.peek() {
                None | Some(b')') => return true,
                Some(b'\\') => {
                    self.advance(1);
                    let Some(c) = self.peek() else { return false };
                    if (b'0'..=b'7').contains(&c) {
                        let mut value: u16 = 0;
                        for _ in 0..3 {
                            match self.peek() {
                                Some(d @ b'0'..=b'7') => {
                                    value = value * 8 + u16::from(d - b'0');
                                    self.advance(1);
                                }
                                _ => break,
                            }
                        }
                        // The spec says to ignore the overflow.
                        out.push(value.to_le_bytes()[0]);
                    } else if !self.eol() {
                        out.push(match c {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'f' => 0x0C,
                            other => other,
                        });
                        self.advance(1);
                    }
                }
                Some(b'(') => {
                    if depth == 0 {
                        return true;
                    }
                    self.advance(1);
                    out.push(b'(');
                    if !self.literal_inner(depth - 1, out) || !self.tag(b")") {
                        return false;
                    }
                    out.push(b')');
                }
                Some(c) => {
                    out.push(c);
                    self.advance(1);
                }
            }
        }
    }

    fn hex(&mut self) -> Option<Vec<u8>> {
        let start = self.pos;
        if !self.tag(b"<") {
            return None;
        }
        let (mut out, mut high) = (Vec::new(), true);
        loop {
            while self.peek().is_some_and(is_whitespace) {
                self.advance(1);
            }
            let Some(value) = self.peek().and_then(hex_value) else { break };
            if high {
                out.push(value << 4);
            } else if let Some(last) = out.last_mut() {
                *last |= value;
            }
            high = !high;
            self.advance(1);
        }
        if self.tag(b">") {
            Some(out)
        } else {
            self.pos = start;
            None
        }
    }

    fn array(&mut self, depth: usize) -> Option<Vec<Object>> {
        let start = self.pos;
        if !self.tag(b"[") {
            return None;
        }
        self.space();
        let mut items = Vec::new();
        while let Some(item) = self.object(depth) {
            items.push(item);
        }
        if self.tag(b"]") {
            Some(items)
        } else {
            self.pos = start;
            None
        }
    }

    pub(super) fn dictionary(&mut self, depth: usize) -> Option<Dictionary> {
        let start = self.pos;
        if !self.tag(b"<<") {
            return None;
        }
        self.space();
        let mut dictionary = Dictionary::new();
        loop {
            let entry = self.pos;
            let Some(key) = self.name() else { break };
            self.space();
            match self.object(depth) {
                Some(value) => dictionary.set(key, value),
                None => {
                    self.pos = entry;
                    break;
                }
            }
        }
        if self.tag(b">>") {
            Some(dictionary)
        } else {
            self.pos = start;
            None
        }
    }

    /// A direct object and the space after it.
    fn object(&mut self, depth: usize) -> Option<Object> {
        if depth == 0 || self.objects >= DICTIONARY_OBJECTS {
            return None;
        }
        self.objects += 1;
        let object = if self.tag(b"null") {
            Object::Null
        } else if self.tag(b"true") {
            Object::Boolean(true)
        } else if self.tag(b"false") {
            Object::Boolean(false)
        } else if let Some(reference) = self.reference() {
            reference
        } else if let Some(number) = self.number() {
            number
        } else if let Some(name) = self.name() {
            Object::Name(name)
        } else if let Some(text) = self.literal() {
            Object::String(text, StringFormat::Literal)
        } else if let Some(text) = self.hex() {
            Object::String(text, StringFormat::Hexadecimal)
        } else if let Some(items) = self.array(depth - 1) {
            Object::Array(items)
        } else if let Some(dictionary) = self.dictionary(depth - 1) {
            Object::Dictionary(dictionary)
        } else {
            return None;
        };
        self.space();
        Some(object)
    }
}

/// Positions of `needle` in `haystack`.
pub(super) fn occurrences<'h>(haystack: &'h [u8], needle: &'h [u8]) -> impl Iterator<Item = usize> + 'h {
    haystack.windows(needle.len()).enumerate().filter(move |(_, window)| *window == needle).map(|(at, _)| at)
}

/// The `12 0` before an `obj` keyword at `at`, when it is written plainly.
pub(super) fn id_before(data: &[u8], at: usize) -> Option<ObjectId> {
    header_before(data, at).map(|(id, _)| id)
}

/// The id of the object whose `obj` keyword is at `at`, and where its header starts.
pub(super) fn header_before(data: &[u8], at: usize) -> Option<(ObjectId, usize)> {
    fn number_before(data: &[u8], end: usize) -> Option<(u64, usize)> {
        let start = data[..end].iter().rposition(|c| !c.is_ascii_digit()).map_or(0, |p| p + 1);
        let digits = std::str::from_utf8(&data[start..end]).ok()?;
        Some((digits.parse().ok()?, start))
    }
    let mut end = at;
    while end > 0 && is_whitespace(data[end - 1]) {
        end -= 1;
    }
    let (generation, start) = number_before(data, end)?;
    let mut end = start;
    while end > 0 && is_whitespace(data[end - 1]) {
        end -= 1;
    }
    if end == start {
        return None;
    }
    let (number, header) = number_before(data, end)?;
    Some(((u32::try_from(number).ok()?, u16::try_from(generation).ok()?), header))
}

/// A stream found in the raw file: where its keyword and data are, and its dictionary.
pub(super) struct Found {
    pub(super) obj_at: usize,
    pub(super) keyword_at: usize,
    pub(super) data_at: usize,
    pub(super) dict: Dictionary,
}

/// Calls `each` with every stream an `obj` keyword of the file opens, the way the library
/// would read it from there. Every occurrence of `obj` is tried (also those inside strings or
/// other streams' data), so that no stream the library could find is missed; the bytes looked
/// at in all are bounded, as a crafted file could make every attempt read far.
pub(super) fn for_each_stream(data: &[u8], mut each: impl FnMut(Found) -> Result<(), String>) -> Result<(), String> {
    let budget = data.len().saturating_mul(4).saturating_add(DICTIONARY_WINDOW);
    let mut looked_at = 0usize;
    for obj_at in occurrences(data, b"obj") {
        let window = &data[..data.len().min(obj_at + 3 + DICTIONARY_WINDOW)];
        let mut syntax = Syntax::new(window, obj_at + 3);
        syntax.space();
        let dict = if syntax.peek() == Some(b'<') { syntax.dictionary(MAX_NESTING) } else { None };
        looked_at = looked_at.saturating_add(syntax.furthest - obj_at);
        if looked_at > budget {
            return Err("the PDF is too intricate to be checked".to_owned());
        }
        let Some(dict) = dict else { continue };
        syntax.space();
        let keyword_at = syntax.pos;
        if !syntax.tag(b"stream") {
            continue;
        }
        syntax.space0();
        if !syntax.eol() {
            continue;
        }
        each(Found { obj_at, keyword_at, data_at: syntax.pos, dict })?;
    }
    Ok(())
}

/// Whether a `stream` keyword at `at` could end a dictionary for the library: `>>`, then
/// whitespace and comments, then the keyword. Errs towards yes.
fn could_follow_a_dictionary(data: &[u8], at: usize) -> bool {
    let mut end = at;
    for _ in 0..64 {
        while end > 0 && is_whitespace(data[end - 1]) {
            end -= 1;
        }
        if end == 0 {
            return false;
        }
        if data[end - 1] == b'>' {
            return true;
        }
        // Perhaps the end of a comment: a `%` on the line makes it one.
        let line = data[..end].iter().rposition(|&c| c == b'\n' || c == b'\r').map_or(0, |p| p + 1);
        match data[line..end].iter().position(|&c| c == b'%') {
            Some(percent) if end != at => end = line + percent,
            _ => return false,
        }
    }
    true
}

/// `stream` keywords the library could read as such but the scan did not find behind a
/// dictionary: their streams could not be checked, so the file is refused.
pub(super) fn check_all_found(data: &[u8], found: &HashSet<usize>) -> Result<(), String> {
    for at in occurrences(data, b"stream") {
        if at >= 3 && &data[at - 3..at] == b"end" || found.contains(&at) {
            continue;
        }
        let mut syntax = Syntax::new(data, at + 6);
        syntax.space0();
        if !syntax.eol() || at > 0 && !is_whitespace(data[at - 1]) && data[at - 1] != b'>' {
            continue;
        }
        if could_follow_a_dictionary(data, at) {
            return Err("the PDF has a stream that cannot be checked".to_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::pdf::fixtures::{Builder, flate_stream, name, read, text};

    #[test]
    fn a_stream_the_scan_cannot_find_makes_the_file_refused() {
        let mut builder = Builder::new();
        builder.page(flate_stream(&text("Hidden.")), Dictionary::new());
        let mut bytes = builder.bytes();
        let at = bytes.windows(4).position(|w| w == b"obj\n").unwrap() + 4;
        bytes.splice(at..at, b"%>>\nstream\n".iter().copied());
        assert_eq!(read(&bytes).unwrap_err(), "the PDF has a stream that cannot be checked");
    }

    #[test]
    fn the_syntax_is_read_as_the_library_reads_it() {
        let source =
            b"<< /A 1 0 R /B [1 -2.5 .5 +3 (a\\(b\\)c \\101) <48 65 6C6>] /C#20D /E /H << /F true >> /G null >>";
        let mut syntax = Syntax::new(source, 0);
        let parsed = syntax.dictionary(MAX_NESTING).unwrap();
        assert_eq!(parsed.get(b"A").unwrap(), &Object::Reference((1, 0)));
        let items = parsed.get(b"B").unwrap().as_array().unwrap();
        assert_eq!(items[0], Object::Integer(1));
        assert_eq!(items[1], Object::Real(-2.5));
        assert_eq!(items[2], Object::Real(0.5));
        assert_eq!(items[3], Object::Integer(3));
        assert_eq!(items[4], Object::String(b"a(b)c A".to_vec(), StringFormat::Literal));
        assert_eq!(items[5], Object::String(b"Hel`".to_vec(), StringFormat::Hexadecimal));
        assert_eq!(parsed.get(b"C D").unwrap(), &name("E"));
        assert_eq!(parsed.get(b"H").unwrap().as_dict().unwrap().get(b"F").unwrap(), &Object::Boolean(true));
        assert_eq!(parsed.get(b"G").unwrap(), &Object::Null);
        assert_eq!(id_before(b"12 0 obj", 5), Some((12, 0)));
        assert_eq!(id_before(b"x obj", 2), None);
    }
}
