//! Step 1: the streams of the raw file, found and measured before the library loads it, as
//! loading decodes object and cross-reference streams whole and without a bound. A stream the
//! scan cannot find, or cannot decrypt as the library would, makes the file refused.

use std::collections::HashSet;

use pdf_extract::encryption::{self, EncryptionState};
use pdf_extract::{Dictionary, Document, Object, ObjectId, Stream};

use super::filters::{Decoded, decode, filters, is_unread};
use super::syntax::{
    DICTIONARY_WINDOW, Found, MAX_NESTING, Syntax, check_all_found, for_each_stream, header_before, id_before,
    occurrences,
};
use super::tokens::Tokens;
use crate::sources::bounded::{Limits, OverCap, size};

/// Object headers (`12 0 obj`) indexed to resolve lengths and the encryption dictionary; a
/// file with more is refused rather than indexed.
const MAX_OBJECT_HEADERS: usize = 2_000_000;

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
pub(super) fn check_streams(data: &[u8], limits: &Limits) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use pdf_extract::{Dictionary, Object, Stream};

    use crate::sources::pdf::fixtures::{Builder, dict, flate_stream, name, read, text, zlib};

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
}
