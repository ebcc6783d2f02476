//! How much an uploaded document may grow into while its text is extracted. A DOCX is a zip
//! archive and a PDF holds compressed streams: a file of a few megabytes can declare, or
//! simply inflate to, gigabytes. Every cap here is checked while reading, before the bytes
//! are kept, so a file over one costs at most the cap in time and a small buffer in memory,
//! and is refused with the reason.

use std::fmt;
use std::io::{self, Read, Seek};

const MIB: u64 = 1024 * 1024;

/// The most one member of a DOCX archive (in practice `word/document.xml`) may inflate to.
pub const MAX_DOCX_MEMBER_BYTES: u64 = 64 * MIB;
/// The most all the members of a DOCX archive together may declare, and the most read from
/// them in all.
pub const MAX_DOCX_TOTAL_BYTES: u64 = 128 * MIB;
/// The most one PDF stream (a page's content, a font, an object stream...) may decode to.
pub const MAX_PDF_STREAM_BYTES: u64 = 32 * MIB;
/// The most all the streams of a PDF together may decode to.
pub const MAX_PDF_DECODED_BYTES: u64 = 128 * MIB;
/// The most tokens (numbers, names, operators...) the object streams of a PDF may hold: the
/// PDF library keeps each as an object of about a hundred bytes.
pub const MAX_PDF_OBJECT_TOKENS: u64 = 2_000_000;
/// The most drawing instructions (operators and their operands) read for one PDF page, forms
/// it draws included each time it draws them: the PDF library holds a page's instructions in
/// memory, up to several hundred bytes each.
pub const MAX_PDF_PAGE_TOKENS: u64 = 100_000;
/// The most drawing instructions read for a whole PDF (a stream shared by pages counts for
/// each), which bounds the time extraction takes (about a second per million).
pub const MAX_PDF_TOKENS: u64 = 4_000_000;
/// How deep PDF forms may draw other forms.
pub const MAX_PDF_FORM_DEPTH: usize = 16;
/// The most pages a PDF may have (the library lists them all first, and a page tree can share
/// subtrees to declare far more pages than the file holds).
pub const MAX_PDF_PAGES: usize = 10_000;
/// The most text extracted from a DOCX or PDF. Plain formats (text, Markdown, HTML, CSV) are
/// their own text, bounded by the upload size limit.
pub const MAX_EXTRACTED_TEXT_BYTES: u64 = 10 * MIB;

/// The caps one extraction works to: [`Limits::DEFAULT`] in the service, smaller ones in tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub docx_member_bytes: u64,
    pub docx_total_bytes: u64,
    pub pdf_stream_bytes: u64,
    pub pdf_decoded_bytes: u64,
    pub pdf_object_tokens: u64,
    pub pdf_page_tokens: u64,
    pub pdf_tokens: u64,
    pub pdf_form_depth: usize,
    pub text_bytes: u64,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        docx_member_bytes: MAX_DOCX_MEMBER_BYTES,
        docx_total_bytes: MAX_DOCX_TOTAL_BYTES,
        pdf_stream_bytes: MAX_PDF_STREAM_BYTES,
        pdf_decoded_bytes: MAX_PDF_DECODED_BYTES,
        pdf_object_tokens: MAX_PDF_OBJECT_TOKENS,
        pdf_page_tokens: MAX_PDF_PAGE_TOKENS,
        pdf_tokens: MAX_PDF_TOKENS,
        pdf_form_depth: MAX_PDF_FORM_DEPTH,
        text_bytes: MAX_EXTRACTED_TEXT_BYTES,
    };
}

/// Small caps, so that tests exercise every one of them with small files.
#[cfg(test)]
pub(crate) const SMALL: Limits = Limits {
    docx_member_bytes: 64 * 1024,
    docx_total_bytes: 128 * 1024,
    pdf_stream_bytes: 256 * 1024,
    pdf_decoded_bytes: 1024 * 1024,
    pdf_object_tokens: 10_000,
    pdf_page_tokens: 10_000,
    pdf_tokens: 50_000,
    pdf_form_depth: 4,
    text_bytes: 4 * 1024,
};

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// A size for people: `64 MiB`, `1.5 KiB`, `900 bytes`.
pub fn size(bytes: u64) -> String {
    // Exact conversions are not needed for a message.
    #[allow(clippy::cast_precision_loss)]
    let value = bytes as f64;
    for (unit, scale) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= scale {
            #[allow(clippy::cast_precision_loss)]
            let scaled = value / scale as f64;
            return if bytes.is_multiple_of(scale) {
                format!("{scaled:.0} {unit}")
            } else {
                format!("{scaled:.1} {unit}")
            };
        }
    }
    format!("{bytes} bytes")
}

/// The error a [`Capped`] reader fails with once more than its cap comes out; found again
/// under other readers' error wrapping with [`over_cap`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverCap(pub String);

impl fmt::Display for OverCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OverCap {}

/// The reason of an [`OverCap`] somewhere in `error`'s chain.
pub fn over_cap(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(over) = error.downcast_ref::<OverCap>() {
            return Some(over.0.clone());
        }
        if let Some(io) = error.downcast_ref::<io::Error>()
            && let Some(over) = io.get_ref().and_then(|inner| inner.downcast_ref::<OverCap>())
        {
            return Some(over.0.clone());
        }
        current = error.source();
    }
    None
}

/// Reads at most `cap` bytes of `inner`: one more is an error carrying `reason` (an
/// [`OverCap`]), so that the caller never holds, or waits for, more than the cap.
pub struct Capped<R> {
    inner: R,
    cap: u64,
    read: u64,
    reason: String,
    exceeded: bool,
}

impl<R: Read> Capped<R> {
    pub fn new(inner: R, cap: u64, reason: String) -> Self {
        Capped { inner, cap, read: 0, reason, exceeded: false }
    }

    /// Bytes read so far.
    pub fn count(&self) -> u64 {
        self.read
    }

    /// Whether the cap was reached, the reason if so.
    pub fn exceeded(&self) -> Option<&str> {
        self.exceeded.then_some(self.reason.as_str())
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.exceeded {
            return Err(io::Error::other(OverCap(self.reason.clone())));
        }
        // One byte past the cap is asked for, to tell "exactly the cap" from "more".
        let room = usize::try_from(self.cap.saturating_sub(self.read).saturating_add(1)).unwrap_or(usize::MAX);
        let len = buf.len().min(room);
        let read = self.inner.read(&mut buf[..len])?;
        self.read += read as u64;
        if self.read > self.cap {
            self.exceeded = true;
            return Err(io::Error::other(OverCap(self.reason.clone())));
        }
        Ok(read)
    }
}

/// Reads all of `reader` into nothing and tells how many bytes came out; an [`OverCap`] from
/// a [`Capped`] in the chain is the error, any other error ends the count (a decoder that
/// fails part way gives what it had decoded, as the PDF library does).
pub fn drain(reader: &mut dyn Read) -> Result<u64, OverCap> {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => return Ok(total),
            Ok(read) => total += read as u64,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => {
                return match over_cap(&error) {
                    Some(reason) => Err(OverCap(reason)),
                    None => Ok(total),
                };
            }
        }
    }
}

/// The sizes a zip archive declares for its members, checked before anything is inflated:
/// one member over `member_cap` or all of them over `total_cap` is the reason to refuse.
/// `what` names the archive in the reason ("the DOCX").
pub fn check_declared_sizes<R: Read + Seek>(
    archive: &mut zip::ZipArchive<R>,
    what: &str,
    limits: &Limits,
) -> Result<(), String> {
    let mut total = 0u64;
    for index in 0..archive.len() {
        let member = archive.by_index_raw(index).map_err(|e| format!("{what} is not a valid archive: {e}"))?;
        let declared = member.size();
        if declared > limits.docx_member_bytes {
            return Err(format!(
                "{what} member {} declares {} uncompressed, over the limit of {} per member",
                member.name(),
                size(declared),
                size(limits.docx_member_bytes)
            ));
        }
        total = total.saturating_add(declared);
        if total > limits.docx_total_bytes {
            return Err(format!(
                "{what} declares more than {} uncompressed in all, over the limit",
                size(limits.docx_total_bytes)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_well() {
        assert_eq!(size(64 * MIB), "64 MiB");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(900), "900 bytes");
    }

    #[test]
    fn a_capped_reader_gives_exactly_the_cap_and_fails_on_one_byte_more() {
        let data = [7u8; 100];
        let mut exact = Capped::new(&data[..], 100, "too long".to_owned());
        let mut out = Vec::new();
        assert_eq!(exact.read_to_end(&mut out).unwrap(), 100);
        assert_eq!(exact.exceeded(), None);

        let mut short = Capped::new(&data[..], 99, "too long".to_owned());
        let error = short.read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(over_cap(&error).as_deref(), Some("too long"));
        assert_eq!(short.exceeded(), Some("too long"));
        assert_eq!(short.count(), 100, "it stopped one byte past the cap");
        assert_eq!(drain(&mut Capped::new(&data[..], 10, "cap".to_owned())), Err(OverCap("cap".to_owned())));
        assert_eq!(drain(&mut &data[..]), Ok(100));
    }
}
