//! Decoding through the library's own filters (FlateDecode, LZWDecode, ASCII85Decode; it
//! cannot decode the others), into nothing: a stream is measured by decoding it the way the
//! library would, each stage capped, without ever holding what it decodes to.

use std::cell::Cell;
use std::io::{self, BufRead, BufReader, Read};
use std::rc::Rc;

use pdf_extract::{Dictionary, Object};

use super::syntax::is_whitespace;
use super::tokens::Tokens;
use crate::sources::bounded::{self, Capped, OverCap, size};

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
pub(super) struct Decoded {
    pub(super) bytes: u64,
    pub(super) tokens: u64,
    pub(super) failed: bool,
    /// Bytes of the input the decoders took in (read ahead included).
    pub(super) consumed: u64,
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

pub(super) fn decode(
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
pub(super) fn filters(dict: &Dictionary) -> Vec<&[u8]> {
    match dict.get(b"Filter") {
        Ok(Object::Name(name)) => vec![name.as_slice()],
        Ok(Object::Array(items)) => {
            items.iter().map(|item| item.as_name().ok()).collect::<Option<Vec<_>>>().unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// Images and attached files: text extraction never needs them decoded.
pub(super) fn is_unread(dict: &Dictionary) -> bool {
    matches!(dict.get(b"Subtype"), Ok(Object::Name(name)) if name == b"Image")
        || matches!(dict.get(b"Type"), Ok(Object::Name(name)) if name == b"EmbeddedFile")
}

#[cfg(test)]
mod tests {
    use crate::sources::pdf::fixtures::{Builder, dict, name, read, zlib};
    use pdf_extract::{Dictionary, Object, Stream};

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
}
