//! The text of a PDF, read within the caps of [`bounded`](super::bounded). The PDF library
//! (lopdf, under pdf-extract) decodes what it meets whole and without a bound: object and
//! cross-reference streams as it loads a file, page contents, forms and fonts as the text is
//! extracted; and it holds every drawing instruction of a page in memory, several hundred
//! bytes each. So before it is given a file:
//!
//! 1. every stream of the file is found in the raw bytes, parsed the way the library parses
//!    it, and decoded into nothing through the same filters, stopping at the caps
//!    ([`check_streams`]); a stream of an encrypted file is decrypted first, as the library
//!    would, and a stream that cannot be found this way makes the file refused;
//! 2. once the file is loaded, its pages are counted and the instructions each page takes to
//!    read are counted, forms drawn from it included as often as they are drawn
//!    ([`check_pages`]): a form that draws itself, or a page tree that loops, is refused
//!    rather than followed until the stack overflows (which aborts the process) or for ever;
//! 3. the text is collected page by page, up to its cap.
//!
//! Images and attached files are never decoded: their streams are emptied once the file is
//! loaded, as text extraction has no use for them (the library would read an image's pixels
//! as drawing instructions). They count towards the caps only where the library could
//! decode them while loading the file (see [`check_streams`]).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{self, BufRead, BufReader, Read};
use std::rc::Rc;

use pdf_extract::encryption::{self, EncryptionState};
use pdf_extract::{
    ConvertToFmt, Dictionary, Document, MediaBox, Object, ObjectId, OutputDev, OutputError, PlainTextOutput, Stream,
    StringFormat, Transform,
};

use super::bounded::{self, Capped, Limits, MAX_PDF_PAGES, OverCap, size};

/// The library's bounds on nesting (`reader::MAX_NESTING_DEPTH` and `MAX_BRACKET`).
const MAX_NESTING: usize = 100;
const MAX_BRACKET: usize = 100;
/// How far past an `obj` keyword a stream's dictionary is looked for, and how many objects
/// it may hold: real stream dictionaries are far smaller.
const DICTIONARY_WINDOW: usize = 1024 * 1024;
const DICTIONARY_OBJECTS: usize = 100_000;
/// Object headers (`12 0 obj`) indexed to resolve lengths and the encryption dictionary; a
/// file with more is refused rather than indexed.
const MAX_OBJECT_HEADERS: usize = 2_000_000;

/// The pages' text, or the reason the file is refused.
pub fn read_pages(bytes: &[u8], limits: &Limits) -> Result<Vec<String>, String> {
    check_streams(bytes, limits)?;
    let mut document =
        Document::load_mem(bytes).map_err(|e| format!("the PDF cannot be read: {}", OutputError::PdfError(e)))?;
    // As pdf-extract does: an encrypted file is opened with the empty password.
    if document.is_encrypted() {
        document.decrypt("").map_err(|e| format!("the PDF cannot be read: {}", OutputError::PdfError(e)))?;
    }
    drop_unread(&mut document);
    check_pages(&document, limits)?;
    extract(&document, limits)
}

// ---------------------------------------------------------------------------------------
// The file's syntax, as lopdf reads it (src/parser/mod.rs), for stream dictionaries, trailers
// and the encryption dictionary.

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0 | 0x0C)
}

fn is_delimiter(c: u8) -> bool {
    b"()<>[]{}/%".contains(&c)
}

fn is_regular(c: u8) -> bool {
    !is_whitespace(c) && !is_delimiter(c)
}

fn hex_value(c: u8) -> Option<u8> {
    (c as char).to_digit(16).and_then(|v| u8::try_from(v).ok())
}

struct Syntax<'a> {
    data: &'a [u8],
    pos: usize,
    /// The furthest byte looked at, for the scan's budget.
    furthest: usize,
    objects: usize,
}

impl<'a> Syntax<'a> {
    fn new(data: &'a [u8], pos: usize) -> Self {
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
    fn space(&mut self) {
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

    fn unsigned<T: std::str::FromStr>(&mut self) -> Option<T> {
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
    fn number(&mut self) -> Option<Object> {
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

    fn dictionary(&mut self, depth: usize) -> Option<Dictionary> {
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
fn occurrences<'h>(haystack: &'h [u8], needle: &'h [u8]) -> impl Iterator<Item = usize> + 'h {
    haystack.windows(needle.len()).enumerate().filter(move |(_, window)| *window == needle).map(|(at, _)| at)
}

/// The `12 0` before an `obj` keyword at `at`, when it is written plainly.
fn id_before(data: &[u8], at: usize) -> Option<ObjectId> {
    header_before(data, at).map(|(id, _)| id)
}

/// The id of the object whose `obj` keyword is at `at`, and where its header starts.
fn header_before(data: &[u8], at: usize) -> Option<(ObjectId, usize)> {
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
struct Found {
    obj_at: usize,
    keyword_at: usize,
    data_at: usize,
    dict: Dictionary,
}

/// Calls `each` with every stream an `obj` keyword of the file opens, the way the library
/// would read it from there. Every occurrence of `obj` is tried (also those inside strings or
/// other streams' data), so that no stream the library could find is missed; the bytes looked
/// at in all are bounded, as a crafted file could make every attempt read far.
fn for_each_stream(data: &[u8], mut each: impl FnMut(Found) -> Result<(), String>) -> Result<(), String> {
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
fn check_all_found(data: &[u8], found: &HashSet<usize>) -> Result<(), String> {
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

// ---------------------------------------------------------------------------------------
// Decoding through the library's filters (FlateDecode, LZWDecode, ASCII85Decode; it cannot
// decode the others), into nothing.

/// Skips the first bytes of a reader: the library, when a zlib stream is damaged, inflates it
/// again as raw deflate after its two-byte header, which gives at least as much, so that is
/// what is measured.
struct Skip<R> {
    inner: R,
    skip: usize,
}

impl<R: Read> Read for Skip<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.skip > 0 {
            let mut scratch = [0u8; 2];
            let len = self.skip.min(scratch.len());
            let read = self.inner.read(&mut scratch[..len])?;
            if read == 0 {
                return Ok(0);
            }
            self.skip -= read;
        }
        self.inner.read(buf)
    }
}

struct Lzw<R> {
    inner: BufReader<R>,
    decoder: weezl::decode::Decoder,
    done: bool,
}

impl<R: Read> Lzw<R> {
    fn new(inner: R, early_change: bool) -> Self {
        // The library's settings (src/object.rs, decompress_lzw).
        let decoder = if early_change {
            weezl::decode::Decoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8)
        } else {
            weezl::decode::Decoder::new(weezl::BitOrder::Msb, 8)
        };
        Lzw { inner: BufReader::new(inner), decoder, done: false }
    }
}

impl<R: Read> Read for Lzw<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while !self.done && !buf.is_empty() {
            let input = self.inner.fill_buf()?;
            let at_end = input.is_empty();
            let result = self.decoder.decode_bytes(input, buf);
            self.inner.consume(result.consumed_in);
            if !matches!(result.status, Ok(weezl::LzwStatus::Ok)) || at_end && result.consumed_out == 0 {
                self.done = true;
            }
            if result.consumed_out > 0 {
                return Ok(result.consumed_out);
            }
            if result.consumed_in == 0 {
                self.done = true;
            }
        }
        Ok(0)
    }
}

struct Ascii85<R> {
    inner: BufReader<R>,
    group: [u8; 5],
    len: usize,
    out: [u8; 4],
    out_len: usize,
    out_at: usize,
    done: bool,
}

impl<R: Read> Ascii85<R> {
    fn new(inner: R) -> Self {
        Ascii85 { inner: BufReader::new(inner), group: [0; 5], len: 0, out: [0; 4], out_len: 0, out_at: 0, done: false }
    }

    /// Decodes the group so far, padded, into `out`; a group of one character gives nothing.
    fn flush(&mut self) {
        if self.len > 1 {
            let mut value: u64 = 0;
            for index in 0..5 {
                value = value * 85 + u64::from(if index < self.len { self.group[index] } else { 84 });
            }
            self.out = u32::try_from(value & 0xFFFF_FFFF).unwrap_or_default().to_be_bytes();
            self.out_len = self.len - 1;
            self.out_at = 0;
        }
        self.len = 0;
    }
}

impl<R: Read> Read for Ascii85<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.out_at < self.out_len {
                let len = buf.len().min(self.out_len - self.out_at);
                buf[..len].copy_from_slice(&self.out[self.out_at..self.out_at + len]);
                self.out_at += len;
                return Ok(len);
            }
            if self.done {
                return Ok(0);
            }
            let next = self.inner.fill_buf()?.first().copied();
            if next.is_some() {
                self.inner.consume(1);
            }
            match next {
                Some(c) if is_whitespace(c) => {}
                Some(b'z') if self.len == 0 => {
                    self.out = [0; 4];
                    (self.out_len, self.out_at) = (4, 0);
                }
                Some(c @ b'!'..=b'u') => {
                    self.group[self.len] = c - b'!';
                    self.len += 1;
                    if self.len == 5 {
                        self.flush();
                    }
                }
                // The end marker, the end of the data, or a character the library refuses.
                _ => {
                    self.flush();
                    self.done = true;
                }
            }
        }
    }
}

/// A reader of what `filters` decode `input` to, each stage capped at `cap` bytes (the library
/// holds each stage's output whole). Filters it cannot decode end the chain.
fn decoder<'r>(filters: &[&[u8]], params: Option<&Dictionary>, input: impl Read + 'r, cap: u64) -> Box<dyn Read + 'r> {
    let reason = || format!("a stream of the PDF decodes to more than {} (the limit per stream)", size(cap));
    let mut reader: Box<dyn Read + 'r> = Box::new(input);
    for filter in filters {
        reader = match *filter {
            b"FlateDecode" => {
                Box::new(Capped::new(flate2::read::DeflateDecoder::new(Skip { inner: reader, skip: 2 }), cap, reason()))
            }
            b"LZWDecode" => {
                let early_change = params
                    .and_then(|p| p.get(b"EarlyChange").ok())
                    .and_then(|v| v.as_i64().ok())
                    .is_none_or(|v| v != 0);
                Box::new(Capped::new(Lzw::new(reader, early_change), cap, reason()))
            }
            b"ASCII85Decode" => Box::new(Capped::new(Ascii85::new(reader), cap, reason())),
            _ => break,
        };
    }
    reader
}

/// What a stream decodes to: its size, its syntax tokens when asked, and whether a filter
/// failed part way (the library then keeps the raw data instead).
#[derive(Debug, Default, Clone, Copy)]
struct Decoded {
    bytes: u64,
    tokens: u64,
    failed: bool,
    /// Bytes of the input the decoders took in (read ahead included).
    consumed: u64,
}

/// A slice as a reader that tells how much was taken from it.
struct Counted<'a> {
    data: &'a [u8],
    taken: Rc<Cell<u64>>,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.data.read(buf)?;
        self.taken.set(self.taken.get() + read as u64);
        Ok(read)
    }
}

fn decode(
    filters: &[&[u8]],
    params: Option<&Dictionary>,
    input: &[u8],
    cap: u64,
    mut tokens: Option<&mut Tokens>,
) -> Result<Decoded, OverCap> {
    let taken = Rc::new(Cell::new(0));
    let mut reader = decoder(filters, params, Counted { data: input, taken: taken.clone() }, cap);
    let mut buffer = vec![0u8; 64 * 1024];
    let mut decoded = Decoded::default();
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                decoded.bytes += read as u64;
                if let Some(tokens) = tokens.as_deref_mut() {
                    tokens.feed(&buffer[..read]);
                    if tokens.full() {
                        break;
                    }
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => match bounded::over_cap(&error) {
                Some(reason) => return Err(OverCap(reason)),
                None => {
                    decoded.failed = true;
                    break;
                }
            },
        }
    }
    if let Some(tokens) = tokens {
        tokens.finish();
        decoded.tokens = tokens.count;
    }
    decoded.consumed = taken.get();
    Ok(decoded)
}

/// The filters of a stream as the library reads them: none when `Filter` is not a name or
/// an array of names.
fn filters(dict: &Dictionary) -> Vec<&[u8]> {
    match dict.get(b"Filter") {
        Ok(Object::Name(name)) => vec![name.as_slice()],
        Ok(Object::Array(items)) => {
            items.iter().map(|item| item.as_name().ok()).collect::<Option<Vec<_>>>().unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// Images and attached files: text extraction never needs them decoded.
fn is_unread(dict: &Dictionary) -> bool {
    matches!(dict.get(b"Subtype"), Ok(Object::Name(name)) if name == b"Image")
        || matches!(dict.get(b"Type"), Ok(Object::Name(name)) if name == b"EmbeddedFile")
}

// ---------------------------------------------------------------------------------------
// Tokens of PDF syntax, counted as they stream by.

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
struct Tokens {
    count: u64,
    cap: u64,
    draws: HashMap<Vec<u8>, u64>,
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
    fn new(cap: u64) -> Self {
        Tokens { cap, ..Tokens::default() }
    }

    fn full(&self) -> bool {
        self.count > self.cap
    }

    fn feed(&mut self, bytes: &[u8]) {
        for &c in bytes {
            self.byte(c);
        }
    }

    fn finish(&mut self) {
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

// ---------------------------------------------------------------------------------------
// 1. The streams of the raw file.

struct Check<'a> {
    data: &'a [u8],
    limits: &'a Limits,
    states: Vec<EncryptionState>,
    headers: Option<Vec<(ObjectId, usize)>>,
    endstreams: Vec<usize>,
    decoded: u64,
    object_tokens: u64,
    /// Raw bytes decoders and decryption took in, and how many they may: a crafted file can
    /// make every stream's decoder read on through the rest of the file.
    consumed: u64,
    budget: u64,
    /// Whether images and attached files may go unchecked: only when the library cannot be
    /// made to decode them as it loads the file (see `check_streams`).
    skip_unread: bool,
    /// Where the library reads cross-reference sections (it decodes a stream found there).
    xref_at: HashSet<usize>,
}

/// Checks every stream of the raw file against the caps before the library sees it.
///
/// Images and attached files are left out when the library cannot decode them as it loads
/// the file (they are emptied once it is loaded): it decodes there object streams, the
/// stream at each cross-reference offset, and the container of any compressed object it
/// resolves for an indirect `Length`, or of every compressed object in an encrypted file.
/// So they are left out only when they are none of those and no stream has an indirect
/// length, and the file is not encrypted.
pub fn check_streams(data: &[u8], limits: &Limits) -> Result<(), String> {
    let mut found = HashSet::new();
    let mut trailers = Vec::new();
    let mut offsets = Vec::new();
    let mut indirect_lengths = false;
    for_each_stream(data, |stream| {
        found.insert(stream.keyword_at);
        indirect_lengths |= matches!(stream.dict.get(b"Length"), Ok(Object::Reference(_)));
        xref_offsets(&stream.dict, &mut offsets);
        // The library takes whatever stream its last `startxref` points at as the
        // cross-reference stream, whose dictionary is then the trailer.
        if stream.dict.has(b"Encrypt") {
            trailers.push(stream.dict);
        }
        Ok(())
    })?;
    check_all_found(data, &found)?;
    drop(found);
    for at in occurrences(data, b"trailer") {
        let mut syntax = Syntax::new(&data[..data.len().min(at + 7 + DICTIONARY_WINDOW)], at + 7);
        syntax.space();
        if let Some(trailer) = syntax.dictionary(MAX_NESTING) {
            xref_offsets(&trailer, &mut offsets);
            if trailer.has(b"Encrypt") {
                trailers.push(trailer);
            }
        }
    }
    for at in occurrences(data, b"startxref") {
        let mut syntax = Syntax::new(data, at + 9);
        syntax.space();
        if let Some(offset) = syntax.unsigned::<u64>() {
            offsets.push(offset);
        }
    }
    // Offsets count from the header, where the library starts the file.
    let start = occurrences(data, b"%PDF-").next().unwrap_or(0);
    let xref_at = offsets
        .into_iter()
        .filter_map(|offset| {
            let at = start.checked_add(usize::try_from(offset).ok()?)?;
            let mut syntax = Syntax::new(data, at.min(data.len()));
            syntax.space();
            Some(syntax.pos)
        })
        .collect();
    let mut check = Check {
        data,
        limits,
        states: Vec::new(),
        headers: None,
        endstreams: occurrences(data, b"endstream").collect(),
        decoded: 0,
        object_tokens: 0,
        consumed: 0,
        budget: 0,
        skip_unread: false,
        xref_at,
    };
    check.states = check.encryption(&trailers)?;
    check.skip_unread = check.states.is_empty() && !indirect_lengths;
    check.budget = (data.len() as u64).saturating_mul(4).saturating_add(limits.pdf_decoded_bytes);
    for_each_stream(data, |stream| check.stream(&stream))
}

impl Check<'_> {
    /// `12 0 obj` headers of the file, sorted by id, indexed the first time they are needed.
    fn headers(&mut self) -> Result<&[(ObjectId, usize)], String> {
        if self.headers.is_none() {
            let mut headers = Vec::new();
            for at in occurrences(self.data, b"obj") {
                if let Some(id) = id_before(self.data, at) {
                    if headers.len() == MAX_OBJECT_HEADERS {
                        return Err("the PDF holds too many objects to be checked".to_owned());
                    }
                    headers.push((id, at + 3));
                }
            }
            headers.sort_unstable();
            self.headers = Some(headers);
        }
        Ok(self.headers.as_deref().unwrap_or_default())
    }

    /// Where the object `id` is defined (all its versions).
    fn definitions(&mut self, id: ObjectId) -> Result<Vec<usize>, String> {
        let headers = self.headers()?;
        let start = headers.partition_point(|(other, _)| *other < id);
        Ok(headers[start..].iter().take_while(|(other, _)| *other == id).map(|(_, at)| *at).collect())
    }

    /// The decryption states the library could use: each trailer's `Encrypt` dictionary
    /// opened with the empty password, as the library opens files.
    fn encryption(&mut self, trailers: &[Dictionary]) -> Result<Vec<EncryptionState>, String> {
        let mut states = Vec::new();
        for trailer in trailers.iter().take(4) {
            // The library only follows a reference here.
            let Ok(Object::Reference(id)) = trailer.get(b"Encrypt") else { continue };
            for at in self.definitions(*id)? {
                let mut syntax = Syntax::new(&self.data[..self.data.len().min(at + DICTIONARY_WINDOW)], at);
                syntax.space();
                let Some(dictionary) = syntax.dictionary(MAX_NESTING) else { continue };
                let mut document = Document::new();
                document.trailer = trailer.clone();
                document.objects.insert(*id, Object::Dictionary(dictionary));
                if document.authenticate_password("").is_ok()
                    && let Ok(state) = EncryptionState::decode(&document, "")
                {
                    states.push(state);
                }
            }
        }
        Ok(states)
    }

    /// Where the data of `stream` may end for the library: at its `Length` (direct, or each
    /// value found for an indirect one) or before the next `endstream`. `None` when the length
    /// is an object the scan cannot see (inside an object stream).
    fn ends(&mut self, stream: &Found) -> Result<Option<Vec<usize>>, String> {
        let len = self.data.len();
        let mut ends = Vec::new();
        match stream.dict.get(b"Length") {
            Ok(Object::Integer(length)) => {
                ends.push(usize::try_from(*length).map_or(len, |length| stream.data_at.saturating_add(length)));
            }
            Ok(Object::Reference(id)) => {
                let definitions = self.definitions(*id)?;
                let values: Vec<i64> = definitions
                    .into_iter()
                    .filter_map(|at| {
                        let mut syntax = Syntax::new(self.data, at);
                        syntax.space();
                        syntax.number().and_then(|n| n.as_i64().ok())
                    })
                    .collect();
                if values.is_empty() {
                    return Ok(None);
                }
                ends.extend(
                    values.iter().map(|v| usize::try_from(*v).map_or(len, |v| stream.data_at.saturating_add(v))),
                );
            }
            _ => {}
        }
        let next = self.endstreams.partition_point(|at| *at < stream.data_at);
        let end = self.endstreams.get(next).copied().unwrap_or(len);
        ends.push(end);
        // Without the end of line before `endstream`.
        let data = self.data;
        if end >= 2 && &data[end - 2..end] == b"\r\n" {
            ends.push(end - 2);
        } else if end >= 1 && matches!(data[end - 1], b'\r' | b'\n') {
            ends.push(end - 1);
        }
        let mut ends: Vec<usize> = ends.into_iter().map(|end| end.min(len).max(stream.data_at)).collect();
        ends.sort_unstable();
        ends.dedup();
        Ok(Some(ends))
    }

    /// An image or attached file the library does not decode as it loads the file.
    fn never_loaded(&self, stream: &Found) -> bool {
        let dict = &stream.dict;
        is_unread(dict)
            && !dict.has(b"First")
            && !dict.has(b"W")
            && !dict.has_type(b"ObjStm")
            && !dict.has_type(b"XRef")
            && header_before(self.data, stream.obj_at).is_some_and(|(_, at)| !self.xref_at.contains(&at))
    }

    /// Counts raw bytes taken in; each stream may read ahead of its data by a buffer.
    fn spend(&mut self, bytes: u64) -> Result<(), String> {
        self.consumed = self.consumed.saturating_add(bytes);
        if self.consumed > self.budget {
            return Err("the PDF is too intricate to be checked".to_owned());
        }
        Ok(())
    }

    fn stream(&mut self, stream: &Found) -> Result<(), String> {
        if self.skip_unread && self.never_loaded(stream) {
            // Emptied once loaded: never decoded.
            return Ok(());
        }
        self.budget = self.budget.saturating_add(64 * 1024);
        let limits = *self.limits;
        let filters = filters(&stream.dict);
        let params = stream.dict.get(b"DecodeParms").and_then(Object::as_dict).ok();
        let object_stream = stream.dict.has(b"First");
        let entry_width = entry_width(&stream.dict);
        let token_cap = limits.pdf_object_tokens.saturating_sub(self.object_tokens);
        let over = |reason: OverCap| reason.0;
        let ends = self.ends(stream)?;
        let data = self.data;

        let mut measured = Decoded::default();
        let mut keep = |check: &mut Self, decoded: Decoded| {
            measured.bytes = measured.bytes.max(decoded.bytes);
            measured.tokens = measured.tokens.max(decoded.tokens);
            check.spend(decoded.consumed)
        };
        // As stored. Deflate data ends itself, so it is read up to the end of the file,
        // whatever the length says; the other filters up to where the data may end.
        let end = match (&ends, filters.first()) {
            (_, Some(&b"FlateDecode")) | (None, _) => data.len(),
            (Some(ends), _) => ends.iter().copied().max().unwrap_or(data.len()),
        };
        let raw = &data[stream.data_at..end];
        let mut tokens = object_stream.then(|| Tokens::new(token_cap));
        let decoded = decode(&filters, params, raw, limits.pdf_stream_bytes, tokens.as_mut()).map_err(over)?;
        keep(self, decoded)?;
        if object_stream && (decoded.failed || filters.is_empty()) {
            let mut tokens = Tokens::new(token_cap);
            keep(self, decode(&[], None, raw, limits.pdf_stream_bytes, Some(&mut tokens)).map_err(over)?)?;
        }
        // Decrypted, as the library would, with each end the data may have.
        if !self.states.is_empty() {
            let cannot = || "the PDF has an encrypted stream that cannot be checked".to_owned();
            let ends = ends.ok_or_else(cannot)?;
            let id = id_before(data, stream.obj_at).ok_or_else(cannot)?;
            let states = std::mem::take(&mut self.states);
            for state in &states {
                for end in &ends {
                    let ciphertext = &data[stream.data_at..*end];
                    self.spend(ciphertext.len() as u64)?;
                    let mut object = Object::Stream(Stream::new(stream.dict.clone(), ciphertext.to_vec()));
                    if encryption::decrypt_object(state, id, &mut object).is_err() {
                        continue;
                    }
                    let Object::Stream(decrypted) = object else { continue };
                    let mut tokens = object_stream.then(|| Tokens::new(token_cap));
                    let decoded =
                        decode(&filters, params, &decrypted.content, limits.pdf_stream_bytes, tokens.as_mut())
                            .map_err(over)?;
                    keep(self, decoded)?;
                }
            }
            self.states = states;
        }

        self.decoded = self.decoded.saturating_add(measured.bytes);
        if self.decoded > limits.pdf_decoded_bytes {
            return Err(format!(
                "the streams of the PDF decode to more than {} in all (the limit)",
                size(limits.pdf_decoded_bytes)
            ));
        }
        // Each cross-reference entry becomes an entry of the library's table.
        let entries = entry_width.map_or(0, |width| measured.bytes / width);
        self.object_tokens = self.object_tokens.saturating_add(measured.tokens).saturating_add(entries);
        if self.object_tokens > limits.pdf_object_tokens {
            return Err(format!(
                "the PDF declares more than {} objects in its object and cross-reference streams (the limit)",
                limits.pdf_object_tokens
            ));
        }
        Ok(())
    }
}

/// The cross-reference offsets a trailer points to.
fn xref_offsets(dict: &Dictionary, offsets: &mut Vec<u64>) {
    for key in [&b"Prev"[..], b"XRefStm"] {
        if let Ok(Object::Integer(offset)) = dict.get(key)
            && let Ok(offset) = u64::try_from(*offset)
        {
            offsets.push(offset);
        }
    }
}

/// The bytes of one entry of a cross-reference stream (`W`).
fn entry_width(dict: &Dictionary) -> Option<u64> {
    let widths = dict.get(b"W").and_then(Object::as_array).ok()?;
    let width: i64 = widths.iter().filter_map(|w| w.as_i64().ok()).map(|w| w.max(0)).sum();
    u64::try_from(width).ok().filter(|w| *w > 0)
}

// ---------------------------------------------------------------------------------------
// 2. The pages of the loaded file.

/// Empties image and attached-file streams: text extraction has no use for them, and the
/// PDF reader would decode an image a page draws and read its pixels as drawing instructions.
fn drop_unread(document: &mut Document) {
    for object in document.objects.values_mut() {
        if let Object::Stream(stream) = object
            && is_unread(&stream.dict)
        {
            stream.set_plain_content(Vec::new());
        }
    }
}

/// How deep a page may sit in its page tree (the library's own bound on page trees).
const MAX_PAGE_TREE_DEPTH: usize = 256;

/// A page and its ancestors, as the PDF reader climbs them for what a page inherits: its
/// `get_inherited` follows `Parent` recursively and without an end, so a loop, or a climb
/// deeper than the library's bound on page trees, is refused rather than overflow the stack.
fn ancestry<'d>(document: &'d Document, page: &'d Dictionary) -> Result<Vec<&'d Dictionary>, String> {
    let mut chain = vec![page];
    let mut seen = HashSet::new();
    let mut current = page;
    while let Ok(parent) = current.get(b"Parent").and_then(Object::as_reference) {
        if !seen.insert(parent) || chain.len() > MAX_PAGE_TREE_DEPTH {
            return Err("the page tree of the PDF loops or is too deep".to_owned());
        }
        let Ok(next) = document.get_dictionary(parent) else { break };
        chain.push(next);
        current = next;
    }
    Ok(chain)
}

fn deref<'d>(document: &'d Document, object: &'d Object) -> Option<&'d Object> {
    match object {
        Object::Reference(id) => document.get_object(*id).ok(),
        other => Some(other),
    }
}

#[derive(Default)]
struct StreamCost {
    tokens: u64,
    draws: Vec<(Vec<u8>, u64)>,
}

struct Pages<'d> {
    document: &'d Document,
    limits: &'d Limits,
    streams: HashMap<ObjectId, Rc<StreamCost>>,
    /// Form and resources (by address: the document does not change meanwhile) to the
    /// instructions drawing the form takes.
    forms: HashMap<(ObjectId, usize), u64>,
    drawing: Vec<ObjectId>,
}

/// Checks the pages of the loaded file: their number, and the instructions each takes to
/// read and all of them do.
pub fn check_pages(document: &Document, limits: &Limits) -> Result<(), String> {
    let pages: Vec<ObjectId> = document.page_iter().take(MAX_PDF_PAGES + 1).collect();
    if pages.len() > MAX_PDF_PAGES {
        return Err(format!("the PDF has more than {MAX_PDF_PAGES} pages (the limit)"));
    }
    let mut walk = Pages { document, limits, streams: HashMap::new(), forms: HashMap::new(), drawing: Vec::new() };
    let mut total = 0u64;
    for (index, page_id) in pages.iter().enumerate() {
        let Ok(page) = document.get_dictionary(*page_id) else { continue };
        // The first dictionary up the tree, as the reader takes it.
        let resources = ancestry(document, page)?.into_iter().find_map(|node| {
            node.get(b"Resources").ok().and_then(|r| deref(document, r)).and_then(|r| r.as_dict().ok())
        });
        let mut cost = 0u64;
        for content in document.get_page_contents(*page_id) {
            cost = cost.saturating_add(walk.cost(content, resources, 0)?);
            if cost > limits.pdf_page_tokens {
                return Err(format!(
                    "page {} of the PDF takes more than {} drawing instructions to read (the limit per page)",
                    index + 1,
                    limits.pdf_page_tokens
                ));
            }
        }
        total = total.saturating_add(cost);
        if total > limits.pdf_tokens {
            return Err(format!(
                "the PDF takes more than {} drawing instructions to read (the limit)",
                limits.pdf_tokens
            ));
        }
    }
    Ok(())
}

impl<'d> Pages<'d> {
    /// The tokens of a content stream or form, and the forms it draws, decoded once.
    fn stream(&mut self, id: ObjectId) -> Result<Rc<StreamCost>, String> {
        if let Some(cost) = self.streams.get(&id) {
            return Ok(cost.clone());
        }
        let cost = match self.document.get_object(id) {
            Ok(Object::Stream(stream)) => {
                let cap = self.limits.pdf_page_tokens;
                let mut tokens = Tokens::new(cap);
                // As the PDF reader: decoded when it has filters, the raw data if decoding fails.
                let filters = filters(&stream.dict);
                let params = stream.dict.get(b"DecodeParms").and_then(Object::as_dict).ok();
                let decoded =
                    decode(&filters, params, &stream.content, self.limits.pdf_stream_bytes, Some(&mut tokens))
                        .map_err(|over| over.0)?;
                if decoded.failed {
                    let mut raw = Tokens::new(cap);
                    decode(&[], None, &stream.content, self.limits.pdf_stream_bytes, Some(&mut raw))
                        .map_err(|over| over.0)?;
                    if raw.count > tokens.count {
                        tokens = raw;
                    }
                }
                StreamCost { tokens: tokens.count, draws: tokens.draws.into_iter().collect() }
            }
            _ => StreamCost::default(),
        };
        let cost = Rc::new(cost);
        self.streams.insert(id, cost.clone());
        Ok(cost)
    }

    /// The instructions reading stream `id` with `resources` takes, the forms it draws
    /// included (each time it draws them).
    fn cost(&mut self, id: ObjectId, resources: Option<&'d Dictionary>, depth: usize) -> Result<u64, String> {
        let stream = self.stream(id)?;
        let mut cost = stream.tokens;
        for (name, times) in &stream.draws {
            let Some((form, form_resources)) = self.form(name, resources) else { continue };
            let key = (form, form_resources.map_or(0, |r| std::ptr::from_ref(r) as usize));
            let each = match self.forms.get(&key) {
                Some(each) => *each,
                None => {
                    if depth + 1 > self.limits.pdf_form_depth {
                        return Err(format!(
                            "the PDF nests forms deeper than {} (the limit)",
                            self.limits.pdf_form_depth
                        ));
                    }
                    if self.drawing.contains(&form) {
                        return Err("a form of the PDF draws itself".to_owned());
                    }
                    self.drawing.push(form);
                    let each = self.cost(form, form_resources, depth + 1);
                    self.drawing.pop();
                    let each = each?;
                    self.forms.insert(key, each);
                    each
                }
            };
            cost = cost.saturating_add(each.saturating_mul(*times));
            if cost > self.limits.pdf_page_tokens {
                return Ok(cost);
            }
        }
        Ok(cost)
    }

    /// The form `/name Do` draws with `resources`, and the resources it is read with: its
    /// own, else those it was drawn with.
    fn form(&self, name: &[u8], resources: Option<&'d Dictionary>) -> Option<(ObjectId, Option<&'d Dictionary>)> {
        let document = self.document;
        let xobjects = deref(document, resources?.get(b"XObject").ok()?)?.as_dict().ok()?;
        let id = xobjects.get(name).ok()?.as_reference().ok()?;
        let stream = document.get_object(id).ok()?.as_stream().ok()?;
        let own = stream.dict.get(b"Resources").ok().and_then(|r| deref(document, r)).and_then(|r| r.as_dict().ok());
        Some((id, own.or(resources)))
    }
}

// ---------------------------------------------------------------------------------------
// 3. The text, page by page, up to its cap.

/// The text written so far, one string per page begun.
#[derive(Default)]
struct Written {
    pages: Vec<String>,
    /// Pages the reader finished.
    finished: usize,
    bytes: u64,
    cap: u64,
    over: bool,
}

/// Where the PDF reader's plain-text output writes: the current page, within the cap.
#[derive(Clone)]
struct Sink(Rc<RefCell<Written>>);

impl fmt::Write for Sink {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut written = self.0.borrow_mut();
        let bytes = written.bytes.saturating_add(text.len() as u64);
        if written.over || bytes > written.cap {
            written.over = true;
            return Err(fmt::Error);
        }
        written.bytes = bytes;
        if let Some(page) = written.pages.last_mut() {
            page.push_str(text);
        }
        Ok(())
    }
}

impl ConvertToFmt for Sink {
    type Writer = Sink;

    fn convert(self) -> Sink {
        self
    }
}

/// The reader's own plain-text output, started afresh on each page as its page-by-page
/// extraction does, writing into [`Sink`].
struct Paged {
    sink: Sink,
    page: Option<PlainTextOutput<Sink>>,
}

impl OutputDev for Paged {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        self.sink.0.borrow_mut().pages.push(String::new());
        let mut page = PlainTextOutput::new(self.sink.clone());
        page.begin_page(page_num, media_box, art_box)?;
        self.page = Some(page);
        Ok(())
    }

    fn end_page(&mut self) -> Result<(), OutputError> {
        if let Some(page) = self.page.as_mut() {
            page.end_page()?;
        }
        self.sink.0.borrow_mut().finished += 1;
        Ok(())
    }

    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        match self.page.as_mut() {
            Some(page) => page.output_character(trm, width, spacing, font_size, char),
            None => Ok(()),
        }
    }

    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.page.as_mut().map_or(Ok(()), OutputDev::begin_word)
    }

    fn end_word(&mut self) -> Result<(), OutputError> {
        self.page.as_mut().map_or(Ok(()), OutputDev::end_word)
    }

    fn end_line(&mut self) -> Result<(), OutputError> {
        self.page.as_mut().map_or(Ok(()), OutputDev::end_line)
    }
}

/// The text of each page. As pdf-extract's page-by-page extraction: the pages before one
/// that cannot be read are kept, the rest dropped.
fn extract(document: &Document, limits: &Limits) -> Result<Vec<String>, String> {
    let written = Rc::new(RefCell::new(Written {
        pages: Vec::new(),
        finished: 0,
        bytes: 0,
        cap: limits.text_bytes,
        over: false,
    }));
    let mut paged = Paged { sink: Sink(written.clone()), page: None };
    let outcome = pdf_extract::output_doc(document, &mut paged);
    drop(paged);
    let mut written = written.take();
    if written.over {
        return Err(format!("the text of the document is longer than {} (the limit)", size(limits.text_bytes)));
    }
    if outcome.is_err() {
        written.pages.truncate(written.finished);
    }
    Ok(written.pages)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use pdf_extract::encryption::{EncryptionVersion, Permissions};

    use super::*;

    const LIMITS: Limits = bounded::SMALL;

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn dict(entries: &[(&str, Object)]) -> Dictionary {
        let mut dict = Dictionary::new();
        for (key, value) in entries {
            dict.set(key.as_bytes().to_vec(), value.clone());
        }
        dict
    }

    fn name(name: &str) -> Object {
        Object::Name(name.as_bytes().to_vec())
    }

    fn text(sentence: &str) -> Vec<u8> {
        format!("BT /F1 12 Tf 72 720 Td ({sentence}) Tj ET").into_bytes()
    }

    fn flate_stream(data: &[u8]) -> Stream {
        Stream::new(dict(&[("Filter", name("FlateDecode"))]), zlib(data))
    }

    /// A PDF of Helvetica pages, built with the PDF library itself.
    struct Builder {
        document: Document,
        pages: ObjectId,
        font: ObjectId,
        kids: Vec<Object>,
    }

    impl Builder {
        fn new() -> Self {
            let mut document = Document::with_version("1.5");
            let pages = document.new_object_id();
            let font = document.add_object(dict(&[
                ("Type", name("Font")),
                ("Subtype", name("Type1")),
                ("BaseFont", name("Helvetica")),
            ]));
            Builder { document, pages, font, kids: Vec::new() }
        }

        fn add(&mut self, stream: Stream) -> ObjectId {
            self.document.add_object(stream)
        }

        fn page(&mut self, content: Stream, xobjects: Dictionary) -> &mut Self {
            let content = self.add(content);
            let resources = dict(&[
                ("Font", Object::Dictionary(dict(&[("F1", Object::Reference(self.font))]))),
                ("XObject", Object::Dictionary(xobjects)),
            ]);
            let page = self.document.add_object(dict(&[
                ("Type", name("Page")),
                ("Parent", Object::Reference(self.pages)),
                ("MediaBox", Object::Array(vec![0.into(), 0.into(), 612.into(), 792.into()])),
                ("Contents", Object::Reference(content)),
                ("Resources", Object::Dictionary(resources)),
            ]));
            self.kids.push(Object::Reference(page));
            self
        }

        fn finish(&mut self) -> &mut Document {
            let count = i64::try_from(self.kids.len()).unwrap();
            let pages =
                dict(&[("Type", name("Pages")), ("Kids", Object::Array(self.kids.clone())), ("Count", count.into())]);
            self.document.objects.insert(self.pages, Object::Dictionary(pages));
            let catalog =
                self.document.add_object(dict(&[("Type", name("Catalog")), ("Pages", Object::Reference(self.pages))]));
            self.document.trailer.set("Root", Object::Reference(catalog));
            &mut self.document
        }

        fn bytes(&mut self) -> Vec<u8> {
            let mut out = Vec::new();
            self.finish().save_to(&mut out).unwrap();
            out
        }

        /// Saved with object streams and a cross-reference stream.
        fn modern(&mut self) -> Vec<u8> {
            let mut out = Vec::new();
            self.finish().save_modern(&mut out).unwrap();
            out
        }

        /// Encrypted with RC4 and an empty user password (opened without asking).
        fn encrypted(&mut self) -> Vec<u8> {
            let document = self.finish();
            document.trailer.set(
                "ID",
                Object::Array(vec![
                    Object::string_literal(b"0123456789abcdef".to_vec()),
                    Object::string_literal(b"0123456789abcdef".to_vec()),
                ]),
            );
            let version = EncryptionVersion::V2 {
                document,
                owner_password: "owner",
                user_password: "",
                key_length: 128,
                permissions: Permissions::all(),
            };
            let state = EncryptionState::try_from(version).unwrap();
            document.encrypt(&state).unwrap();
            let mut out = Vec::new();
            document.save_to(&mut out).unwrap();
            out
        }
    }

    fn read(bytes: &[u8]) -> Result<Vec<String>, String> {
        read_pages(bytes, &LIMITS).map(|pages| pages.iter().map(|page| page.trim().to_owned()).collect())
    }

    #[test]
    fn the_text_is_read_page_by_page_whatever_the_file_layout() {
        let mut builder = Builder::new();
        builder.page(flate_stream(&text("Helmets are lent free of charge.")), Dictionary::new());
        builder.page(Stream::new(Dictionary::new(), text("Bikes are serviced on Mondays.")), Dictionary::new());
        let pages = ["Helmets are lent free of charge.", "Bikes are serviced on Mondays."];
        assert_eq!(read(&builder.bytes()).unwrap(), pages);
        let mut builder = Builder::new();
        builder.page(flate_stream(&text("Helmets are lent free of charge.")), Dictionary::new());
        builder.page(Stream::new(Dictionary::new(), text("Bikes are serviced on Mondays.")), Dictionary::new());
        assert_eq!(read(&builder.modern()).unwrap(), pages, "object streams and a cross-reference stream");
        let mut builder = Builder::new();
        builder.page(flate_stream(&text("Helmets are lent free of charge.")), Dictionary::new());
        assert_eq!(read(&builder.encrypted()).unwrap(), pages[..1], "encrypted, opened with the empty password");
    }

    #[test]
    fn a_stream_inflating_past_the_cap_is_refused_before_the_library_reads_it() {
        let mut bomb = text("Fine so far.");
        bomb.resize(257 * 1024, b' ');
        let mut builder = Builder::new();
        builder.page(flate_stream(&bomb), Dictionary::new());
        let reason = read(&builder.bytes()).unwrap_err();
        assert_eq!(reason, "a stream of the PDF decodes to more than 256 KiB (the limit per stream)");
        let mut builder = Builder::new();
        builder.page(flate_stream(&bomb), Dictionary::new());
        assert_eq!(read(&builder.encrypted()).unwrap_err(), reason, "decrypted first, as the library would");

        // Exactly at the cap is read.
        bomb.truncate(256 * 1024);
        let mut builder = Builder::new();
        builder.page(flate_stream(&bomb), Dictionary::new());
        assert_eq!(read(&builder.bytes()).unwrap(), ["Fine so far."]);
    }

    #[test]
    fn chained_filters_are_followed() {
        let inner = zlib(&vec![b' '; 1024 * 1024]);
        let twice = Stream::new(
            dict(&[("Filter", Object::Array(vec![name("FlateDecode"), name("FlateDecode")]))]),
            zlib(&inner),
        );
        let mut builder = Builder::new();
        builder.page(twice, Dictionary::new());
        assert!(read(&builder.bytes()).unwrap_err().contains("decodes to more than 256 KiB"));

        // LZW: a run of one byte, coded by a fresh encoder.
        let mut lzw = weezl::encode::Encoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8);
        let coded = lzw.encode(&vec![b' '; 300 * 1024]).unwrap();
        let mut builder = Builder::new();
        builder.page(Stream::new(dict(&[("Filter", name("LZWDecode"))]), coded), Dictionary::new());
        assert!(read(&builder.bytes()).unwrap_err().contains("decodes to more than 256 KiB"));
    }

    #[test]
    fn all_streams_together_are_capped() {
        let mut builder = Builder::new();
        for _ in 0..5 {
            let mut content = text("A page.");
            content.resize(250 * 1024, b' ');
            builder.page(flate_stream(&content), Dictionary::new());
        }
        assert_eq!(
            read(&builder.bytes()).unwrap_err(),
            "the streams of the PDF decode to more than 1 MiB in all (the limit)"
        );
    }

    #[test]
    fn object_streams_are_capped_in_objects() {
        let mut builder = Builder::new();
        for number in 0..400 {
            builder.document.add_object(Object::Array((0..30).map(Object::Integer).collect()));
            if number == 0 {
                builder.page(flate_stream(&text("Many objects.")), Dictionary::new());
            }
        }
        assert!(read(&builder.modern()).unwrap_err().contains("declares more than 10000 objects"));
    }

    #[test]
    fn a_page_drawing_a_form_many_times_is_counted_each_time() {
        let mut builder = Builder::new();
        let form_content = "0 0 m 10 10 l S\n".repeat(20).into_bytes();
        let form = builder.add(Stream::new(dict(&[("Subtype", name("Form"))]), form_content));
        let draws = "/Fm0 Do\n".repeat(200);
        let xobjects = dict(&[("Fm0", Object::Reference(form))]);
        builder.page(flate_stream(&[text("Drawn.").as_slice(), b"\n", draws.as_bytes()].concat()), xobjects);
        let reason = read(&builder.bytes()).unwrap_err();
        assert_eq!(reason, "page 1 of the PDF takes more than 10000 drawing instructions to read (the limit per page)");
    }

    #[test]
    fn a_form_drawing_itself_is_refused_rather_than_read_forever() {
        let mut builder = Builder::new();
        let form = builder.document.new_object_id();
        let resources = dict(&[("XObject", Object::Dictionary(dict(&[("Me", Object::Reference(form))])))]);
        let looping = Stream::new(
            dict(&[("Subtype", name("Form")), ("Resources", Object::Dictionary(resources))]),
            b"/Me Do".to_vec(),
        );
        builder.document.objects.insert(form, Object::Stream(looping));
        builder.page(flate_stream(b"/Fm0 Do"), dict(&[("Fm0", Object::Reference(form))]));
        assert_eq!(read(&builder.bytes()).unwrap_err(), "a form of the PDF draws itself");
    }

    #[test]
    fn a_page_tree_that_loops_is_refused_rather_than_climbed_forever() {
        let mut builder = Builder::new();
        builder.page(flate_stream(&text("Inherits.")), Dictionary::new());
        let page = builder.kids[0].as_reference().unwrap();
        let pages = builder.pages;
        let document = builder.finish();
        // The page inherits its resources, and the tree above it leads back to it.
        document.get_object_mut(page).unwrap().as_dict_mut().unwrap().remove(b"Resources").unwrap();
        document.get_object_mut(pages).unwrap().as_dict_mut().unwrap().set("Parent", Object::Reference(page));
        let mut bytes = Vec::new();
        document.save_to(&mut bytes).unwrap();
        assert_eq!(read(&bytes).unwrap_err(), "the page tree of the PDF loops or is too deep");
    }

    #[test]
    fn images_are_never_decoded() {
        let image = || {
            Stream::new(
                dict(&[
                    ("Subtype", name("Image")),
                    ("Width", 1024.into()),
                    ("Height", 1024.into()),
                    ("ColorSpace", name("DeviceGray")),
                    ("BitsPerComponent", 8.into()),
                    ("Filter", name("FlateDecode")),
                ]),
                zlib(&vec![0u8; 1024 * 1024]),
            )
        };
        let content = [text("A picture follows.").as_slice(), b"\nq 100 0 0 100 0 0 cm /Im0 Do Q"].concat();
        let mut builder = Builder::new();
        let picture = builder.add(image());
        builder.page(flate_stream(&content), dict(&[("Im0", Object::Reference(picture))]));
        assert_eq!(read(&builder.bytes()).unwrap(), ["A picture follows."]);

        // Unless the library could decode it while loading the file: in an encrypted file it
        // opens any stream the cross-reference names as holding objects, so images count.
        let mut builder = Builder::new();
        let picture = builder.add(image());
        builder.page(flate_stream(&content), dict(&[("Im0", Object::Reference(picture))]));
        assert_eq!(
            read(&builder.encrypted()).unwrap_err(),
            "a stream of the PDF decodes to more than 256 KiB (the limit per stream)"
        );
    }

    #[test]
    fn the_text_is_capped() {
        let mut builder = Builder::new();
        for _ in 0..50 {
            builder.page(flate_stream(&text(&"Lorem ipsum dolor sit amet. ".repeat(4))), Dictionary::new());
        }
        assert_eq!(read(&builder.bytes()).unwrap_err(), "the text of the document is longer than 4 KiB (the limit)");
    }

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
