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
//!
//! The steps are modules of their own: [`syntax`] reads the file as the library does,
//! [`filters`] and [`tokens`] measure what a stream decodes to, and [`streams`], [`pages`] and
//! [`text`] are the three steps above.

mod filters;
mod pages;
mod streams;
mod syntax;
mod text;
mod tokens;

use pdf_extract::{Document, OutputError};

use self::pages::{check_pages, drop_unread};
use self::streams::check_streams;
use self::text::extract;
use super::bounded::Limits;

pub use self::text::Line;

/// The pages' text, or the reason the file is refused.
pub fn read_pages(bytes: &[u8], limits: &Limits) -> Result<Vec<String>, String> {
    let pages = read_lines(bytes, limits)?;
    Ok(pages.into_iter().map(|lines| lines.into_iter().map(|line| line.text).collect::<Vec<_>>().join("\n")).collect())
}

/// The pages' lines with their font sizes, or the reason the file is refused.
pub fn read_lines(bytes: &[u8], limits: &Limits) -> Result<Vec<Vec<Line>>, String> {
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

/// What the tests of each step build their files with: PDFs made by the library itself.
#[cfg(test)]
mod fixtures {
    use std::io::Write;

    use pdf_extract::encryption::{EncryptionState, EncryptionVersion, Permissions};
    use pdf_extract::{Dictionary, Document, Object, ObjectId, Stream};

    use crate::sources::bounded::{self, Limits};

    const LIMITS: Limits = bounded::SMALL;

    pub(super) fn zlib(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    pub(super) fn dict(entries: &[(&str, Object)]) -> Dictionary {
        let mut dict = Dictionary::new();
        for (key, value) in entries {
            dict.set(key.as_bytes().to_vec(), value.clone());
        }
        dict
    }

    pub(super) fn name(name: &str) -> Object {
        Object::Name(name.as_bytes().to_vec())
    }

    pub(super) fn text(sentence: &str) -> Vec<u8> {
        format!("BT /F1 12 Tf 72 720 Td ({sentence}) Tj ET").into_bytes()
    }

    pub(super) fn flate_stream(data: &[u8]) -> Stream {
        Stream::new(dict(&[("Filter", name("FlateDecode"))]), zlib(data))
    }

    /// A PDF of Helvetica pages, built with the PDF library itself.
    pub(super) struct Builder {
        pub(super) document: Document,
        pub(super) pages: ObjectId,
        font: ObjectId,
        pub(super) kids: Vec<Object>,
    }

    impl Builder {
        pub(super) fn new() -> Self {
            let mut document = Document::with_version("1.5");
            let pages = document.new_object_id();
            let font = document.add_object(dict(&[
                ("Type", name("Font")),
                ("Subtype", name("Type1")),
                ("BaseFont", name("Helvetica")),
            ]));
            Builder { document, pages, font, kids: Vec::new() }
        }

        pub(super) fn add(&mut self, stream: Stream) -> ObjectId {
            self.document.add_object(stream)
        }

        pub(super) fn page(&mut self, content: Stream, xobjects: Dictionary) -> &mut Self {
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

        pub(super) fn finish(&mut self) -> &mut Document {
            let count = i64::try_from(self.kids.len()).unwrap();
            let pages =
                dict(&[("Type", name("Pages")), ("Kids", Object::Array(self.kids.clone())), ("Count", count.into())]);
            self.document.objects.insert(self.pages, Object::Dictionary(pages));
            let catalog =
                self.document.add_object(dict(&[("Type", name("Catalog")), ("Pages", Object::Reference(self.pages))]));
            self.document.trailer.set("Root", Object::Reference(catalog));
            &mut self.document
        }

        pub(super) fn bytes(&mut self) -> Vec<u8> {
            let mut out = Vec::new();
            self.finish().save_to(&mut out).unwrap();
            out
        }

        /// Saved with object streams and a cross-reference stream.
        pub(super) fn modern(&mut self) -> Vec<u8> {
            let mut out = Vec::new();
            self.finish().save_modern(&mut out).unwrap();
            out
        }

        /// Encrypted with RC4 and an empty user password (opened without asking).
        pub(super) fn encrypted(&mut self) -> Vec<u8> {
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

    /// The pages' text as [`read_pages`](super::read_pages) gives it, trimmed.
    pub(super) fn read(bytes: &[u8]) -> Result<Vec<String>, String> {
        super::read_pages(bytes, &LIMITS).map(|pages| pages.iter().map(|page| page.trim().to_owned()).collect())
    }
}

#[cfg(test)]
mod tests {
    use pdf_extract::{Dictionary, Stream};

    use super::fixtures::{Builder, flate_stream, read, text};

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
}
